#!/usr/bin/env python3
"""The smallest use of the chimera package: load a model, stream a greedy continuation of a prompt.
Prints the prompt and its continuation as `chimera run -p PROMPT -n N --temp 0` does.

    PYTHONPATH=python examples/python/simple.py MODEL.gguf "Once upon a time" 64
"""
import sys

import chimera


def main():
    if not 2 <= len(sys.argv) <= 4:
        print(f"usage: {sys.argv[0]} MODEL [PROMPT] [N_TOKENS]", file=sys.stderr)
        return 2
    prompt = sys.argv[2] if len(sys.argv) > 2 else "Once upon a time"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    try:
        model = chimera.Model(sys.argv[1])
    except chimera.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(prompt, end="", flush=True)
    for piece in model.generate(prompt, max_tokens=n, temperature=0, stream=True):
        print(piece, end="", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
