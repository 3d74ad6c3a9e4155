"""ctypes declarations of include/chimera.h and the library loader.

The library is found through $CHIMERA_LIB (a path to libchimera.so), else at
build/libchimera.so in the repository this package lives in (what
scripts/setup.sh builds).
"""
import ctypes
import os
import pathlib
import threading

c_size_t = ctypes.c_size_t
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_float = ctypes.c_float
c_char_p = ctypes.c_char_p

OK = 0
ERR_BUFFER_TOO_SMALL = 7

FINISH_REASONS = {0: "length", 1: "stop", 2: "cancelled", 3: "context_full"}
LOGITS_NONE, LOGITS_LAST, LOGITS_ALL = 0, 1, 2


class Error(Exception):
    """A chimera call failed: `status` is the C status code, `status_name` its name, str() the C message."""

    def __init__(self, message, status=6, status_name="CHIMERA_ERR_INTERNAL"):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class ModelParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("n_threads", c_int32), ("isa", c_char_p), ("n_ctx", c_int64)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("arch", c_char_p), ("name", c_char_p), ("chat_template", c_char_p),
                ("isa", c_char_p), ("n_vocab", c_int32), ("token_bos", c_int32), ("token_eos", c_int32),
                ("is_diffusion", c_int32),
                ("n_ctx_train", c_int64), ("n_ctx", c_int64), ("n_embd", c_int64), ("n_layer", c_int64)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class ContextParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("n_ctx", c_int64)]


class SamplingParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("temperature", c_float), ("top_k", c_int32), ("top_p", c_float),
                ("min_p", c_float), ("repeat_penalty", c_float), ("presence_penalty", c_float),
                ("frequency_penalty", c_float), ("penalty_last_n", c_int32), ("seed", ctypes.c_uint64),
                ("grammar", c_char_p), ("json_schema", c_char_p)]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, c_int32, ctypes.POINTER(ctypes.c_char), c_size_t, ctypes.c_void_p)


class GenerateParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("max_tokens", c_int64), ("ignore_eos", c_int32),
                ("sampling", SamplingParams), ("stop", ctypes.POINTER(c_char_p)), ("n_stop", c_size_t),
                ("callback", TOKEN_CALLBACK), ("user_data", ctypes.c_void_p)]


class GenerateResult(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("n_prompt", c_int64), ("n_generated", c_int64),
                ("finish_reason", ctypes.c_int)]


_P = ctypes.c_void_p
_SIGNATURES = {
    "chimera_version": (c_char_p, []),
    "chimera_status_name": (c_char_p, [ctypes.c_int]),
    "chimera_last_error": (c_char_p, []),
    "chimera_model_params_init": (None, [ctypes.POINTER(ModelParams)]),
    "chimera_model_load": (ctypes.c_int, [c_char_p, ctypes.POINTER(ModelParams), ctypes.POINTER(_P)]),
    "chimera_model_free": (ctypes.c_int, [_P]),
    "chimera_model_last_error": (c_char_p, [_P]),
    "chimera_model_info_get": (ctypes.c_int, [_P, ctypes.POINTER(ModelInfo)]),
    "chimera_tokenize": (ctypes.c_int, [_P, c_char_p, c_size_t, ctypes.c_int, ctypes.c_int,
                                        ctypes.POINTER(c_int32), c_size_t, ctypes.POINTER(c_size_t)]),
    "chimera_detokenize": (ctypes.c_int, [_P, ctypes.POINTER(c_int32), c_size_t, ctypes.c_int,
                                          ctypes.c_char_p, c_size_t, ctypes.POINTER(c_size_t)]),
    "chimera_chat_render": (ctypes.c_int, [_P, ctypes.POINTER(ChatMessage), c_size_t, ctypes.c_int,
                                           ctypes.c_char_p, c_size_t, ctypes.POINTER(c_size_t)]),
    "chimera_chat_tokenize": (ctypes.c_int, [_P, ctypes.POINTER(ChatMessage), c_size_t, ctypes.c_int,
                                             ctypes.POINTER(c_int32), c_size_t, ctypes.POINTER(c_size_t)]),
    "chimera_context_params_init": (None, [ctypes.POINTER(ContextParams)]),
    "chimera_context_create": (ctypes.c_int, [_P, ctypes.POINTER(ContextParams), ctypes.POINTER(_P)]),
    "chimera_context_free": (None, [_P]),
    "chimera_context_last_error": (c_char_p, [_P]),
    "chimera_context_reset": (ctypes.c_int, [_P]),
    "chimera_context_cancel": (ctypes.c_int, [_P]),
    "chimera_decode": (ctypes.c_int, [_P, ctypes.POINTER(c_int32), c_size_t, ctypes.c_int,
                                      ctypes.POINTER(c_float), c_size_t]),
    "chimera_generate_params_init": (None, [ctypes.POINTER(GenerateParams)]),
    "chimera_generate": (ctypes.c_int, [_P, ctypes.POINTER(c_int32), c_size_t, ctypes.POINTER(GenerateParams),
                                        ctypes.POINTER(GenerateResult)]),
}

_lib = None
_lock = threading.Lock()


def library_path():
    """Where the package looks for libchimera.so."""
    env = os.environ.get("CHIMERA_LIB")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2] / "build" / "libchimera.so"


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not path.is_file():
                raise Error(f"libchimera not found at {path} (run scripts/setup.sh, or set CHIMERA_LIB)",
                            5, "CHIMERA_ERR_UNSUPPORTED")
            try:
                handle = ctypes.CDLL(str(path))
            except OSError as e:
                raise Error(f"cannot load {path}: {e}", 4, "CHIMERA_ERR_IO") from None
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = handle
        return _lib


def error(status, message):
    """The Error for a failed call."""
    name = lib().chimera_status_name(status)
    return Error(message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message), status,
                 name.decode() if name else "unknown")
