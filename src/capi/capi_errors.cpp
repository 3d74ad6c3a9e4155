// Status codes, error messages and the library version (include/chimera.h).
#include "capi/capi_internal.h"

namespace chimera::capi {
namespace {

thread_local std::string t_last_error;

chimera_status map_code(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return CHIMERA_OK;
    case StatusCode::kInvalidArgument: return CHIMERA_ERR_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return CHIMERA_ERR_NOT_FOUND;
    case StatusCode::kOutOfRange: return CHIMERA_ERR_OUT_OF_RANGE;
    case StatusCode::kIoError: return CHIMERA_ERR_IO;
    case StatusCode::kUnsupported: return CHIMERA_ERR_UNSUPPORTED;
    case StatusCode::kInternal: return CHIMERA_ERR_INTERNAL;
  }
  return CHIMERA_ERR_INTERNAL;
}

}  // namespace

const char* last_error_text() { return t_last_error.c_str(); }

void ErrorSlot::set(const std::string& msg) {
  std::lock_guard<std::mutex> lk(mu_);
  by_thread_[std::this_thread::get_id()] = msg;
}

const char* ErrorSlot::get() const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_thread_.find(std::this_thread::get_id());
  return it == by_thread_.end() ? "" : it->second.c_str();
}

chimera_status fail(ErrorSlot* slot, chimera_status code, const std::string& msg) {
  try {
    t_last_error = msg;
    if (slot) slot->set(msg);
  } catch (...) {  // no memory for the message: the status still tells what happened
  }
  return code;
}

chimera_status fail(ErrorSlot* slot, const Status& s) {
  if (s.is_ok()) return fail(slot, CHIMERA_ERR_INTERNAL, "internal error: failure without a status");
  return fail(slot, map_code(s.code()), s.message());
}

chimera_status null_handle(const char* what) {
  return fail(nullptr, CHIMERA_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

chimera_status check_capacity(ErrorSlot* slot, const void* buf, size_t capacity, size_t need, size_t* n_out,
                              const char* what) {
  if (!n_out) return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, std::string("the length pointer for ") + what + " is NULL");
  *n_out = need;
  if (capacity > 0 && !buf)
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, std::string(what) + " buffer is NULL with a non-zero capacity");
  if (capacity < need)
    return fail(slot, CHIMERA_ERR_BUFFER_TOO_SMALL,
                std::string(what) + " needs " + std::to_string(need) + ", the buffer holds " + std::to_string(capacity));
  return CHIMERA_OK;
}

}  // namespace chimera::capi

extern "C" {

const char* chimera_version(void) { return CHIMERA_VERSION_STRING; }

const char* chimera_status_name(int s) {
  switch (s) {
    case CHIMERA_OK: return "CHIMERA_OK";
    case CHIMERA_ERR_INVALID_ARGUMENT: return "CHIMERA_ERR_INVALID_ARGUMENT";
    case CHIMERA_ERR_NOT_FOUND: return "CHIMERA_ERR_NOT_FOUND";
    case CHIMERA_ERR_OUT_OF_RANGE: return "CHIMERA_ERR_OUT_OF_RANGE";
    case CHIMERA_ERR_IO: return "CHIMERA_ERR_IO";
    case CHIMERA_ERR_UNSUPPORTED: return "CHIMERA_ERR_UNSUPPORTED";
    case CHIMERA_ERR_INTERNAL: return "CHIMERA_ERR_INTERNAL";
    case CHIMERA_ERR_BUFFER_TOO_SMALL: return "CHIMERA_ERR_BUFFER_TOO_SMALL";
    case CHIMERA_ERR_BUSY: return "CHIMERA_ERR_BUSY";
    case CHIMERA_ERR_OUT_OF_MEMORY: return "CHIMERA_ERR_OUT_OF_MEMORY";
  }
  return "unknown";
}

const char* chimera_last_error(void) { return chimera::capi::last_error_text(); }

}  // extern "C"
