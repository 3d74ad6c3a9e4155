"""The chimera Python package against the CLI: tokens, greedy and sampled text, streaming pieces,
logits (bit for bit), chat, errors; on stories260K and a hybrid (attention + Mamba-2) golden model."""
import array
import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

import chimera
from conftest import REPO, cli_path, run_cli

PROMPT = "Once upon a time"


def test_version_is_the_library_version():
    header = (REPO / "include" / "chimera.h").read_text()
    assert f'#define CHIMERA_VERSION_STRING "{chimera.version()}"' in header


def test_tokens_equal_the_cli(model_path):
    m = chimera.Model(model_path, n_threads=2)
    text = "Once upon a time, </s> there was <|endoftext|> a cat."
    assert m.tokenize(text) == [int(x) for x in run_cli("tokenize", "-m", model_path, "-p", text).split()]
    assert m.tokenize(text, parse_special=False) == [
        int(x) for x in run_cli("tokenize", "-m", model_path, "-p", text, "--no-special").split()]
    assert m.tokenize(text, add_special=False) == [
        int(x) for x in run_cli("tokenize", "-m", model_path, "-p", text, "--no-bos").split()]
    ids = m.tokenize(text)
    joined = ",".join(map(str, ids))
    assert m.detokenize(ids, render_special=True) + "\n" == run_cli("detokenize", "-m", model_path, "-t", joined).decode()
    assert m.detokenize(ids) + "\n" == run_cli("detokenize", "-m", model_path, "-t", joined, "--no-special").decode()


def test_greedy_text_and_stream_equal_the_cli(model_path):
    m = chimera.Model(model_path, n_threads=2)
    cli = run_cli("run", "-q", "-m", model_path, "-p", PROMPT, "-n", 40, "--temp", 0).decode()
    assert cli.startswith(PROMPT) and cli.endswith("\n")
    expected = cli[len(PROMPT):-1]
    assert m.generate(PROMPT, max_tokens=40, temperature=0) == expected
    pieces = list(m.generate(PROMPT, max_tokens=40, temperature=0, stream=True))
    assert "".join(pieces) == expected
    assert len(pieces) > 5 and all(pieces)


def test_sampled_text_equals_the_cli_with_the_same_seed(stories_path):
    m = chimera.Model(stories_path, n_threads=2)
    cli = run_cli("run", "-q", "-m", stories_path, "-p", PROMPT, "-n", 32, "--seed", 42, "--top-p", 0.9).decode()
    assert m.generate(PROMPT, max_tokens=32, seed=42, top_p=0.9) == cli[len(PROMPT):-1]
    other = m.generate(PROMPT, max_tokens=32, seed=43, top_p=0.9)
    assert other != cli[len(PROMPT):-1]  # the seed matters (so the equality above is not luck)


def test_logits_equal_the_cli_bit_for_bit(model_path):
    m = chimera.Model(model_path, n_threads=2)
    ids = m.tokenize("Once upon a time, a small robot")
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "logits.f32"
        run_cli("logits", "-m", model_path, "-t", ",".join(map(str, ids)), "-o", out)
        ref = array.array("f")
        ref.frombytes(out.read_bytes())
    rows = m.logits(ids)
    assert len(rows) == len(ids)
    nv = m.n_vocab
    for i, row in enumerate(rows):
        assert len(row) == nv
        assert [float(x) for x in row] == ref[i * nv:(i + 1) * nv].tolist(), f"row {i}"


def test_stop_strings(stories_path):
    m = chimera.Model(stories_path, n_threads=2)
    full = m.generate(PROMPT, max_tokens=40, temperature=0)
    assert "Lily" in full
    assert m.generate(PROMPT, max_tokens=40, temperature=0, stop=["Lily"]) == full[:full.index("Lily")]
    assert "".join(m.generate(PROMPT, max_tokens=40, temperature=0, stop="Lily", stream=True)) == full[:full.index("Lily")]
    assert m.last_finish_reason == "stop"


def test_chat_equals_the_cli_chat(stories_path):
    m = chimera.Model(stories_path, n_threads=2)
    assert m.chat_template is None  # the plain fallback format
    msgs = [{"role": "user", "content": "Hi"}]
    assert m.apply_chat_template(msgs) == "user: Hi\nassistant:"
    cli = run_cli("chat", "-m", stories_path, "--temp", 0, "-n", 20, stdin=b"Hi\n").decode()
    assert m.chat(msgs, max_tokens=20, temperature=0) + "\n" == cli


def test_closing_a_stream_stops_the_generation(stories_path):
    m = chimera.Model(stories_path, n_threads=2)
    it = m.generate(PROMPT, max_tokens=200, temperature=0, stream=True)
    first = next(it)
    it.close()
    assert first
    assert m.last_finish_reason == "cancelled"
    # The model is still usable, and the greedy text is unchanged.
    assert m.generate(PROMPT, max_tokens=5, temperature=0).startswith(first)


def test_errors_carry_the_library_message(stories_path, tmp_path):
    with pytest.raises(chimera.Error) as e:
        chimera.Model(tmp_path / "missing.gguf")
    assert "missing.gguf" in str(e.value) and e.value.status_name == "CHIMERA_ERR_IO"
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf" * 10)
    with pytest.raises(chimera.Error, match="GGUF"):
        chimera.Model(junk)
    with pytest.raises(chimera.Error, match="instruction set"):
        chimera.Model(stories_path, isa="sse9")
    m = chimera.Model(stories_path, n_threads=2, n_ctx=16)
    with pytest.raises(chimera.Error, match="temperature"):
        m.generate(PROMPT, temperature=-1)
    with pytest.raises(chimera.Error) as e:
        m.logits([1, m.n_vocab])
    assert e.value.status_name == "CHIMERA_ERR_INVALID_ARGUMENT"
    with pytest.raises(chimera.Error) as e:
        m.logits([1] * 17)  # more than the context
    assert e.value.status_name == "CHIMERA_ERR_OUT_OF_RANGE"
    with pytest.raises(chimera.Error, match="outside the vocabulary"):
        m.detokenize([-1])
    with pytest.raises(chimera.Error, match="grammar"):
        m.generate(PROMPT, grammar="root ::= nothing_defined")
    with pytest.raises(chimera.Error):
        next(m.generate([1, 99999], stream=True))
    assert m.generate(PROMPT, max_tokens=3, temperature=0)  # still fine after every error
    m.close()
    with pytest.raises(chimera.Error, match="closed"):
        m.tokenize("x")


def test_library_override(tmp_path):
    env = dict(os.environ, CHIMERA_LIB=str(tmp_path / "nope.so"), PYTHONPATH=str(REPO / "python"))
    r = subprocess.run([sys.executable, "-c", "import chimera; chimera.version()"], env=env, capture_output=True,
                       timeout=60)
    assert r.returncode != 0
    assert b"nope.so" in r.stderr and b"chimera.Error" in r.stderr


def test_example_prints_what_the_cli_prints(stories_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    r = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "simple.py"), str(stories_path), PROMPT, "48"],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout == run_cli("run", "-q", "-m", stories_path, "-p", PROMPT, "-n", 48, "--temp", 0)


def test_threads_share_one_model(model_path):
    import threading
    with chimera.Model(model_path, n_threads=2) as m:
        ref = m.generate(PROMPT, max_tokens=24, temperature=0)
        got = [None] * 3

        def work(i):
            got[i] = "".join(m.generate(PROMPT, max_tokens=24, temperature=0, stream=(i % 2 == 0)))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
            assert not t.is_alive()
        assert got == [ref] * 3
