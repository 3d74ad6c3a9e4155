// Helpers for the server integration tests: start the real `chimera serve`
// process on a free loopback port (--port 0; the port is read from its
// "listening on" line), talk to it with httplib::Client, parse SSE streams,
// scrape /metrics, and compute reference outputs with `chimera run`.
// Every wait is bounded; the server is stopped (SIGTERM, then SIGKILL) when
// the ServerProcess goes out of scope, so a failing test never leaks it.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace chimera::test {

using json = nlohmann::json;

inline std::string model_path(const std::string& shared) { return shared + "/models/stories260K.gguf"; }

class ServerProcess {
 public:
  ~ServerProcess() { stop(); }

  // Starts `chimera serve -m MODEL --host 127.0.0.1 --port 0 ARGS...`; waits
  // (<= 30 s) for the listening line. False (with the log in *err) on failure.
  bool start(const std::string& model, const std::vector<std::string>& args, std::string* err) {
    log_ = temp_path("serve-" + std::to_string(counter()++) + ".log");
    std::vector<std::string> argv = {chimera_binary(), "serve", "-m", model, "--host", "127.0.0.1", "--port", "0",
                                     "--threads", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      if (f) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      std::vector<char*> cargs;
      for (auto& a : argv) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv(cargs[0], cargs.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = log();
      const std::string key = "listening on http://127.0.0.1:";
      if (auto p = text.find(key); p != std::string::npos) {
        port_ = std::atoi(text.c_str() + p + key.size());
        // Ready once a connection is answered (on a loaded machine the first
        // connect can be refused for a moment after the line is printed).
        if (port_ > 0 && answers_health()) return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *err = "server did not start; log:\n" + log();
    return false;
  }

  // Returns the exit status (-1 when killed or not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500; ++i) {  // <= 10 s
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }

  // Waits (<= seconds) for the process to exit on its own (after a signal the
  // test sent); its exit status, or -1 when it did not exit (it is then stopped).
  int wait_exit(int seconds) {
    if (pid_ <= 0) return -1;
    int status = 0;
    for (int i = 0; i < seconds * 50; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
    return -1;
  }

  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  bool answers_health() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(10, 0);
    return static_cast<bool>(c.Get("/health"));
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::unique_ptr<httplib::Client> client(int read_timeout_s = 60) const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(read_timeout_s, 0);
    c->set_write_timeout(10, 0);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    return c;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// A streamed response, parsed.
struct StreamResult {
  int status = 0;
  bool got_done = false;
  std::string text;                  // concatenated text / delta.content
  std::vector<std::string> pieces;   // one per non-empty chunk
  std::string finish_reason;
  json usage;
  json error;
  bool transport_ok = false;
  bool saw_role = false;
  std::string transport_error;  // httplib's description when transport_ok is false
};

// POSTs `body` to `path` and hands each parsed SSE `data:` JSON event (not
// [DONE]) to on_event, which returns false to close the connection. Returns
// the HTTP status (-1 when none arrived) and sets *done when [DONE]
// arrived. A connect() that fails under heavy machine load never reached the
// server, so it is retried.
inline int post_sse(httplib::Client& cli, const std::string& path, const json& body,
                    const std::function<bool(const json&)>& on_event, bool* done = nullptr,
                    const std::string& api_key = "", std::string* transport_error = nullptr) {
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers.emplace("Content-Type", "application/json");
  if (!api_key.empty()) req.headers.emplace("Authorization", "Bearer " + api_key);
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      if (ev == "data: [DONE]") {
        if (done) *done = true;
        continue;
      }
      json j = json::parse(ev.substr(6), nullptr, false);
      if (!j.is_discarded() && !on_event(j)) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = cli.send(req, res, err);
  for (int retry = 0; !ok && err == httplib::Error::Connection && retry < 3; ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    res = httplib::Response();
    ok = cli.send(req, res, err);
  }
  if (!ok && transport_error) *transport_error = httplib::to_string(err);
  return res.status > 0 ? res.status : -1;  // a stream closed by on_event keeps its status
}

// POSTs a streaming request; abort_after > 0 closes the connection after that many text chunks.
inline StreamResult post_stream(httplib::Client& cli, const std::string& path, const json& body,
                                int abort_after = 0, const std::string& api_key = "") {
  StreamResult r;
  r.status = post_sse(
      cli, path, body,
      [&](const json& j) {
        if (j.contains("error")) r.error = j["error"];
        if (j.contains("usage") && !j["usage"].is_null()) r.usage = j["usage"];
        if (!j.contains("choices") || j["choices"].empty()) return true;
        const json& c = j["choices"][0];
        std::string piece;
        if (c.contains("text")) piece = c["text"].get<std::string>();
        if (c.contains("delta")) {
          if (c["delta"].contains("role")) r.saw_role = true;
          if (c["delta"].contains("content")) piece = c["delta"]["content"].get<std::string>();
        }
        if (!c["finish_reason"].is_null()) r.finish_reason = c["finish_reason"].get<std::string>();
        if (!piece.empty()) {
          r.text += piece;
          r.pieces.push_back(piece);
          if (abort_after > 0 && (int)r.pieces.size() >= abort_after) return false;
        }
        return true;
      },
      &r.got_done, api_key, &r.transport_error);
  r.transport_ok = r.transport_error.empty();
  return r;
}

inline httplib::Result post_json(httplib::Client& cli, const std::string& path, const std::string& body,
                                 const std::string& api_key = "") {
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  auto r = cli.Post(path.c_str(), h, body, "application/json");
  // A refused connect never reached the server: retrying is safe.
  for (int retry = 0; !r && r.error() == httplib::Error::Connection && retry < 3; ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = cli.Post(path.c_str(), h, body, "application/json");
  }
  return r;
}

// Value of an unlabelled (or exactly labelled) sample in Prometheus text; -1 if absent.
inline double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::atof(line.c_str() + name.size() + 1);
  }
  return -1;
}

inline std::string get_metrics(const ServerProcess& s) {
  auto c = s.client(10);
  auto r = c->Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// Standard output of a shell command.
inline std::string command_output(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::string out;
  char b[4096];
  size_t k;
  while ((k = fread(b, 1, sizeof b, p)) > 0) out.append(b, k);
  pclose(p);
  return out;
}

// Greedy continuation of `prompt` by `chimera run` (the reference), n tokens, EOS ignored.
inline std::string run_reference(const std::string& model, const std::string& prompt, int n) {
  const std::string cmd = chimera_binary() + " run -m " + model + " -p '" + prompt + "' -n " + std::to_string(n) +
                          " --temp 0 --ignore-eos -q --threads 1";
  std::string out = command_output(cmd);
  if (out.compare(0, prompt.size(), prompt) != 0) return "<unexpected run output: " + out + ">";
  out.erase(0, prompt.size());
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace chimera::test

// Starts `chimera serve` on the shared stories260K model with the extra
// arguments in the enclosing test (a fatal failure with the log when it
// cannot start). Declares `srv`.
#define START_SERVER(srv, shared, ...)                                        \
  ::chimera::test::ServerProcess srv;                                         \
  {                                                                           \
    std::string err_;                                                         \
    ASSERT_TRUE(srv.start(::chimera::test::model_path(shared), {__VA_ARGS__}, &err_)) << err_; \
  }
