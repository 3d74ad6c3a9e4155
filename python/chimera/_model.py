"""chimera.Model: a loaded model with tokenizer, generation, chat and logits (over libchimera's C API)."""
import ctypes
import queue
import threading

from . import _lib
from ._lib import Error

try:  # numpy is optional: logits() returns an array with it, lists of floats without
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None


def _ids_array(ids):
    ids = [int(i) for i in ids]
    return (_lib.c_int32 * max(len(ids), 1))(*ids), len(ids)


class _Context:
    """One sequence on the model (chimera_context); freed with close()."""

    def __init__(self, model):
        self._model = model
        handle = ctypes.c_void_p()
        model._check(_lib.lib().chimera_context_create(model._handle, None, ctypes.byref(handle)))
        self.handle = handle

    def check(self, status):
        if status != _lib.OK:
            raise _lib.error(status, _lib.lib().chimera_context_last_error(self.handle))

    def close(self):
        if self.handle:
            _lib.lib().chimera_context_free(self.handle)
            self.handle = None


class Model:
    """A GGUF model loaded by libchimera.

    Model(path, n_threads=0, n_ctx=0, isa=None): n_threads 0 = one per core; n_ctx = the context size of
    each generation (0 = 4096); isa restricts the kernels ("scalar", "avx2", ...; process-wide).
    A Model may be used from several threads; each call runs on its own context.
    """

    def __init__(self, path, n_threads=0, n_ctx=0, isa=None):
        self._handle = None
        lib = _lib.lib()
        params = _lib.ModelParams()
        lib.chimera_model_params_init(ctypes.byref(params))
        params.n_threads = int(n_threads)
        params.n_ctx = int(n_ctx)
        params.isa = isa.encode() if isa is not None else None
        handle = ctypes.c_void_p()
        status = lib.chimera_model_load(str(path).encode(), ctypes.byref(params), ctypes.byref(handle))
        if status != _lib.OK:
            raise _lib.error(status, lib.chimera_last_error())
        self._handle = handle
        info = _lib.ModelInfo()
        info.struct_size = ctypes.sizeof(info)
        self._check(lib.chimera_model_info_get(self._handle, ctypes.byref(info)))
        self.arch = info.arch.decode()
        self.name = info.name.decode()
        self.chat_template = info.chat_template.decode() if info.chat_template is not None else None
        self.isa = info.isa.decode()
        self.n_vocab = info.n_vocab
        self.n_ctx = info.n_ctx
        self.n_ctx_train = info.n_ctx_train
        self.token_bos = info.token_bos
        self.token_eos = info.token_eos
        self.is_diffusion = bool(info.is_diffusion)
        self._idle = []  # contexts kept for reuse
        self._idle_lock = threading.Lock()

    # -- lifetime

    def close(self):
        """Frees the model (also done when it is garbage-collected)."""
        if self._handle:
            with self._idle_lock:
                for c in self._idle:
                    c.close()
                self._idle = []
            self._check(_lib.lib().chimera_model_free(self._handle))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _check(self, status):
        if status != _lib.OK:
            raise _lib.error(status, _lib.lib().chimera_model_last_error(self._handle))

    def _require_open(self):
        if not self._handle:
            raise Error("the model is closed", 1, "CHIMERA_ERR_INVALID_ARGUMENT")

    def _acquire(self):
        self._require_open()
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        return _Context(self)

    def _release(self, ctx):
        if _lib.lib().chimera_context_reset(ctx.handle) != _lib.OK:
            ctx.close()
            return
        with self._idle_lock:
            self._idle.append(ctx)

    # -- tokenizer

    def tokenize(self, text, add_special=True, parse_special=True):
        """Text -> token ids (BOS as the vocabulary asks; special-token text parsed unless parse_special=False)."""
        self._require_open()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        lib = _lib.lib()
        n = _lib.c_size_t(0)
        cap = len(data) + 8
        while True:
            buf = (_lib.c_int32 * cap)()
            status = lib.chimera_tokenize(self._handle, data, len(data), int(add_special), int(parse_special), buf,
                                          cap, ctypes.byref(n))
            if status == _lib.ERR_BUFFER_TOO_SMALL:
                cap = n.value
                continue
            self._check(status)
            return list(buf[: n.value])

    def detokenize(self, ids, render_special=False):
        """Token ids -> text (invalid UTF-8 is replaced)."""
        self._require_open()
        arr, n_ids = _ids_array(ids)
        return self._text_call(lambda buf, cap, n: _lib.lib().chimera_detokenize(
            self._handle, arr, n_ids, int(render_special), buf, cap, n))

    def _text_call(self, call):
        n = _lib.c_size_t(0)
        cap = 256
        while True:
            buf = ctypes.create_string_buffer(cap)
            status = call(buf, cap, ctypes.byref(n))
            if status == _lib.ERR_BUFFER_TOO_SMALL:
                cap = n.value + 1
                continue
            self._check(status)
            return buf.raw[: n.value].decode("utf-8", "replace")

    # -- chat

    def _messages(self, messages):
        arr = (_lib.ChatMessage * max(len(messages), 1))()
        keep = []
        for i, m in enumerate(messages):
            role, content = m["role"], m["content"]
            if not isinstance(role, str) or not isinstance(content, str):
                raise Error(f"messages[{i}]: role and content must be strings", 1, "CHIMERA_ERR_INVALID_ARGUMENT")
            keep.append((role.encode(), content.encode()))
            arr[i].role, arr[i].content = keep[-1]
        return arr, len(messages), keep

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The conversation rendered with the model's chat template (a plain format when it has none)."""
        self._require_open()
        arr, n, _keep = self._messages(messages)
        return self._text_call(lambda buf, cap, nb: _lib.lib().chimera_chat_render(
            self._handle, arr, n, int(add_generation_prompt), buf, cap, nb))

    def chat_tokens(self, messages, add_generation_prompt=True):
        """The conversation's prompt ids: template markers are special tokens, contents plain text."""
        self._require_open()
        arr, n_msgs, _keep = self._messages(messages)
        lib = _lib.lib()
        n = _lib.c_size_t(0)
        cap = 256
        while True:
            buf = (_lib.c_int32 * cap)()
            status = lib.chimera_chat_tokenize(self._handle, arr, n_msgs, int(add_generation_prompt), buf, cap,
                                               ctypes.byref(n))
            if status == _lib.ERR_BUFFER_TOO_SMALL:
                cap = n.value
                continue
            self._check(status)
            return list(buf[: n.value])

    def chat(self, messages, **kwargs):
        """The assistant's reply to `messages` (dicts with "role" and "content"); takes generate()'s options."""
        return self.generate(self.chat_tokens(messages), **kwargs)

    # -- logits

    def logits(self, tokens):
        """One row of n_vocab float32 logits per token (row i = after tokens[0..i]), fed as given (no BOS).
        A numpy array (len(tokens), n_vocab) when numpy is installed, else a list of lists of floats."""
        arr, n = _ids_array(tokens)
        if n == 0:
            raise Error("logits() needs at least one token", 1, "CHIMERA_ERR_INVALID_ARGUMENT")
        nv = self.n_vocab
        out = (_lib.c_float * (n * nv))()
        ctx = self._acquire()
        try:
            ctx.check(_lib.lib().chimera_decode(ctx.handle, arr, n, _lib.LOGITS_ALL, out, n * nv))
        finally:
            self._release(ctx)
        if _np is not None:
            return _np.frombuffer(out, dtype=_np.float32).reshape(n, nv).copy()
        return [out[i * nv:(i + 1) * nv] for i in range(n)]

    # -- generation

    def _generate_params(self, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                         frequency_penalty, penalty_last_n, seed, stop, grammar, json_schema, ignore_eos):
        p = _lib.GenerateParams()
        _lib.lib().chimera_generate_params_init(ctypes.byref(p))
        p.max_tokens = -1 if max_tokens is None else int(max_tokens)
        p.ignore_eos = int(bool(ignore_eos))
        s = p.sampling
        for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                            ("repeat_penalty", repeat_penalty), ("presence_penalty", presence_penalty),
                            ("frequency_penalty", frequency_penalty), ("penalty_last_n", penalty_last_n),
                            ("seed", seed)):
            if value is not None:
                setattr(s, name, value)
        keep = []
        if grammar is not None:
            keep.append(grammar.encode())
            s.grammar = keep[-1]
        if json_schema is not None:
            keep.append(json_schema.encode())
            s.json_schema = keep[-1]
        if stop is not None:
            stops = [stop] if isinstance(stop, str) else list(stop)
            arr = (_lib.c_char_p * max(len(stops), 1))(*[x.encode() for x in stops])
            keep.append(arr)
            p.stop = ctypes.cast(arr, ctypes.POINTER(_lib.c_char_p))
            p.n_stop = len(stops)
        return p, keep

    def generate(self, prompt, max_tokens=128, temperature=None, top_p=None, seed=None, stop=None, stream=False,
                 top_k=None, min_p=None, repeat_penalty=None, presence_penalty=None, frequency_penalty=None,
                 penalty_last_n=None, grammar=None, json_schema=None, ignore_eos=False):
        """Continues `prompt` (text: tokenized with BOS and special-token parsing, as `chimera run -p`; or a
        list of ids, fed as given). Unset sampling options keep the CLI's defaults (temperature 0.8, ...);
        temperature=0 is greedy. max_tokens=None: until end of generation or context end.
        Returns the text, or with stream=True an iterator of text pieces (closing it stops the generation).
        Afterwards last_finish_reason is "length", "stop", "cancelled" or "context_full"."""
        self._require_open()
        ids = self.tokenize(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        params, keep = self._generate_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                                             presence_penalty, frequency_penalty, penalty_last_n, seed, stop,
                                             grammar, json_schema, ignore_eos)
        if stream:
            return self._stream(ids, params, keep)
        pieces = []
        failure = []

        def on_token(token, text, n, _ud):
            try:
                pieces.append(ctypes.string_at(text, n))
                return 0
            except BaseException as e:  # never let an exception unwind through C
                failure.append(e)
                return 1

        self._run(ids, params, on_token)
        if failure:
            raise failure[0]
        return b"".join(pieces).decode("utf-8", "replace")

    def _run(self, ids, params, on_token, started=None):
        arr, n = _ids_array(ids)
        cb = _lib.TOKEN_CALLBACK(on_token)
        params.callback = cb
        result = _lib.GenerateResult()
        result.struct_size = ctypes.sizeof(result)
        ctx = self._acquire()
        try:
            if started is not None:
                started(ctx)
            ctx.check(_lib.lib().chimera_generate(ctx.handle, arr, n, ctypes.byref(params), ctypes.byref(result)))
        finally:
            self._release(ctx)
        self.last_finish_reason = _lib.FINISH_REASONS.get(result.finish_reason, "unknown")
        return result

    def _stream(self, ids, params, keep):
        q = queue.Queue()
        stop = threading.Event()
        done = object()
        ctx_box = []

        def on_token(token, text, n, _ud):
            try:
                q.put(ctypes.string_at(text, n))
            except BaseException:  # pragma: no cover - queue.put does not fail
                return 1
            return 1 if stop.is_set() else 0

        def worker():
            try:
                self._run(ids, params, on_token, started=ctx_box.append)
                q.put(done)
            except BaseException as e:
                q.put(e)

        def pieces():
            thread = threading.Thread(target=worker, name="chimera-generate", daemon=True)
            thread.start()
            try:
                while True:
                    item = q.get()
                    if item is done:
                        return
                    if isinstance(item, BaseException):
                        raise item
                    if item:
                        yield item.decode("utf-8", "replace")
            finally:
                stop.set()
                thread.join()
                _keep = keep  # the stop strings stay alive until the generation ended

        return pieces()
