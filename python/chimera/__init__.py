"""chimera: run GGUF language models in-process through libchimera (the C API in include/chimera.h).

    import chimera
    m = chimera.Model("stories260K.gguf", n_threads=4)
    m.tokenize("Once upon a time")          # -> [1, 403, 407, ...]
    m.generate("Once upon a time", max_tokens=32, temperature=0)
    for piece in m.generate("Once", max_tokens=32, stream=True): print(piece, end="")
    m.chat([{"role": "user", "content": "Hi"}], max_tokens=32)
    m.logits([1, 403, 407])                 # one row of n_vocab floats per token

Failures raise chimera.Error carrying the library's message. The library is $CHIMERA_LIB, else
build/libchimera.so of this repository.
"""
from ._lib import Error, library_path
from ._model import Model

Error.__module__ = __name__  # shown as chimera.Error


def version():
    """The version of the loaded libchimera ("MAJOR.MINOR.PATCH")."""
    from ._lib import lib
    return lib().chimera_version().decode()


__all__ = ["Error", "Model", "library_path", "version"]
