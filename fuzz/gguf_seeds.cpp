// Writes the GGUF fuzzer's seed corpus: small valid files that together use
// every metadata value type, nested and empty arrays, v2 and v3, several
// alignments and tensor types (the same files the format tests use).
// Usage: gguf_seeds DIR
#include <cstdio>

#include "format/gguf_test_files.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  if (!chimera::test::write_seed_corpus(argv[1])) {
    std::fprintf(stderr, "error: cannot write seed files into '%s'\n", argv[1]);
    return 1;
  }
  std::printf("wrote %zu seed files to %s\n", chimera::test::seed_files().size(), argv[1]);
  return 0;
}
