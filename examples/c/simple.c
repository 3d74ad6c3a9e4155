/* The smallest libchimera program: load a model, generate greedily from a prompt and stream the text.
 * Prints the prompt and its continuation as `chimera run -p PROMPT -n N --temp 0` does.
 *
 *   cc -std=c99 simple.c -Iinclude -Lbuild -lchimera -o simple
 *   LD_LIBRARY_PATH=build ./simple MODEL.gguf "Once upon a time" 64
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chimera.h"

static int on_token(int32_t token, const char* text, size_t len, void* user_data) {
  (void)token;
  (void)user_data;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* go on */
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s MODEL [PROMPT] [N_TOKENS]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const long n_predict = argc > 3 ? strtol(argv[3], NULL, 10) : 64;

  chimera_model* model = NULL;
  if (chimera_model_load(argv[1], NULL, &model) != CHIMERA_OK) {
    fprintf(stderr, "error: %s\n", chimera_last_error());
    return 1;
  }
  int rc = 1;
  chimera_context* ctx = NULL;
  int32_t* ids = NULL;
  size_t n_ids = 0;
  /* Ask for the length, then tokenize into a buffer of that size. */
  chimera_status st = chimera_tokenize(model, prompt, strlen(prompt), 1, 1, NULL, 0, &n_ids);
  if (st != CHIMERA_OK && st != CHIMERA_ERR_BUFFER_TOO_SMALL) goto done;
  ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
  if (!ids || chimera_tokenize(model, prompt, strlen(prompt), 1, 1, ids, n_ids, &n_ids) != CHIMERA_OK) goto done;
  if (chimera_context_create(model, NULL, &ctx) != CHIMERA_OK) goto done;

  chimera_generate_params gp;
  chimera_generate_params_init(&gp);
  gp.max_tokens = n_predict;
  gp.sampling.temperature = 0.0f; /* greedy */
  gp.callback = on_token;
  chimera_generate_result result;
  result.struct_size = sizeof result;
  fputs(prompt, stdout);
  if (chimera_generate(ctx, ids, n_ids, &gp, &result) != CHIMERA_OK) goto done;
  printf("\n");
  fprintf(stderr, "%lld prompt tokens, %lld generated, finish reason %d\n", (long long)result.n_prompt,
          (long long)result.n_generated, (int)result.finish_reason);
  rc = 0;
done:
  if (rc) fprintf(stderr, "error: %s\n", chimera_last_error());
  free(ids);
  chimera_context_free(ctx);
  chimera_model_free(model);
  return rc;
}
