/* chimera.h — the stable C API of the chimera inference engine (libchimera.so / libchimera.a).
 *
 * Handles are opaque and owned by the caller: every *_create / *_load has a matching *_free.
 * Every call returns a chimera_status; on an error the message is available from
 *   chimera_last_error()              the calling thread's most recent failed call (any handle),
 *   chimera_model_last_error(m)       the calling thread's most recent failed call on model m,
 *   chimera_context_last_error(c)     ... on context c,   chimera_sampler_last_error(s) ... on sampler s.
 * Messages stay valid until the same thread's next failed call on the same handle (chimera_last_error: on
 * any handle) or until the handle is freed. Out-parameters are written only on CHIMERA_OK (a handle
 * out-parameter is set to NULL on failure), except the
 * sizes that CHIMERA_ERR_BUFFER_TOO_SMALL reports. No C++ type or exception crosses this interface.
 *
 * Structs passed in or out start with `struct_size`: fill it with sizeof(the struct) (the *_init
 * functions do). A size this library does not know is refused with CHIMERA_ERR_INVALID_ARGUMENT, so an
 * application built against another version of this header never has fields misread.
 *
 * Buffers: calls that return variable-length data take (buffer, capacity) and report the length needed;
 * pass a NULL buffer with capacity 0 to ask for the length only (CHIMERA_ERR_BUFFER_TOO_SMALL is returned
 * when the capacity is too small, with the needed length written).
 *
 * Thread safety:
 *   - chimera_version, chimera_status_name, chimera_last_error: any thread, any time.
 *   - A model may be used from several threads at once by: chimera_model_info_get, chimera_tokenize,
 *     chimera_detokenize, chimera_token_is_eog, chimera_chat_render, chimera_chat_tokenize,
 *     chimera_context_create, chimera_sampler_create, chimera_model_last_error.
 *   - A context or a sampler is used by one thread at a time (several contexts: several threads), except
 *     chimera_context_cancel, which any thread may call while the context exists. A call on a context
 *     made from inside that context's own generation callback is refused with CHIMERA_ERR_BUSY.
 *   - Each context has its own compute buffers, but the contexts of one model share its worker
 *     threads: calls that run the model (chimera_decode,
 *     chimera_generate, chimera_sampler_sample) on contexts of the same model are serialized by a
 *     per-model lock. chimera_generate holds it while it computes and releases it around every
 *     callback, so generations on several contexts of one model interleave token by token, and a
 *     callback may use other contexts of the same model. Contexts of different models run in parallel,
 *     each model on its own worker threads.
 *   - The instruction-set override (chimera_model_params.isa) is process-wide: while any model is
 *     loaded, loading one with a different override is refused (CHIMERA_ERR_UNSUPPORTED).
 *   - chimera_model_free must not run concurrently with any other call on that model, and is refused
 *     (CHIMERA_ERR_BUSY) while contexts or samplers of the model are alive.
 */
#ifndef CHIMERA_H
#define CHIMERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CHIMERA_API __attribute__((visibility("default")))
#else
#define CHIMERA_API
#endif

#define CHIMERA_VERSION_MAJOR 0
#define CHIMERA_VERSION_MINOR 1
#define CHIMERA_VERSION_PATCH 0
#define CHIMERA_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define CHIMERA_VERSION (CHIMERA_VERSION_MAJOR * 10000 + CHIMERA_VERSION_MINOR * 100 + CHIMERA_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually loaded (compare with CHIMERA_VERSION_STRING). */
CHIMERA_API const char* chimera_version(void);

typedef enum chimera_status {
  CHIMERA_OK = 0,
  CHIMERA_ERR_INVALID_ARGUMENT = 1, /* bad argument, bad token id, null handle, malformed input (a file
                                       that is not a valid GGUF, a damaged saved state) */
  CHIMERA_ERR_NOT_FOUND = 2,        /* something named that does not exist */
  CHIMERA_ERR_OUT_OF_RANGE = 3,     /* e.g. the context is full */
  CHIMERA_ERR_IO = 4,               /* a file that cannot be opened or read */
  CHIMERA_ERR_UNSUPPORTED = 5,      /* valid request this model / CPU / library cannot serve */
  CHIMERA_ERR_INTERNAL = 6,         /* a bug in chimera */
  CHIMERA_ERR_BUFFER_TOO_SMALL = 7, /* the needed size was written; call again with a larger buffer */
  CHIMERA_ERR_BUSY = 8,             /* the handle is in use (see Thread safety) */
  CHIMERA_ERR_OUT_OF_MEMORY = 9
} chimera_status;

/* A constant name for a status ("CHIMERA_OK", ...; "unknown" for other values). Takes an int so that any
 * value is well-defined. */
CHIMERA_API const char* chimera_status_name(int status);
/* The message of the calling thread's most recent failed call ("" when none). */
CHIMERA_API const char* chimera_last_error(void);

typedef struct chimera_model chimera_model;
typedef struct chimera_context chimera_context;
typedef struct chimera_sampler chimera_sampler;

/* ---------------------------------------------------------------- models */

typedef struct chimera_model_params {
  size_t struct_size;
  int32_t n_threads;   /* worker threads for this model; 0 = one per core */
  const char* isa;     /* "scalar", "avx2", "avx2vnni", "avx512", "avx512vnni", "amx", "neon"; NULL = keep the process's
                          setting (the best the CPU runs unless a model was loaded with another) */
  int64_t n_ctx;       /* default context size of its contexts (tokens); 0 = 4096, as the CLI */
} chimera_model_params;

CHIMERA_API void chimera_model_params_init(chimera_model_params* params);

/* Loads a GGUF model. params may be NULL (defaults). On success *out is a new model. */
CHIMERA_API chimera_status chimera_model_load(const char* path, const chimera_model_params* params,
                                              chimera_model** out);
/* Frees a model (NULL is accepted). CHIMERA_ERR_BUSY while its contexts or samplers exist. */
CHIMERA_API chimera_status chimera_model_free(chimera_model* model);
CHIMERA_API const char* chimera_model_last_error(const chimera_model* model);

typedef struct chimera_model_info {
  size_t struct_size;
  const char* arch;           /* general.architecture ("llama", "granitehybrid", ...) */
  const char* name;           /* general.name ("" when absent) */
  const char* chat_template;  /* tokenizer.chat_template, or NULL when the model has none */
  const char* isa;            /* the kernels' instruction set ("avx2", "avx512", ...) */
  int32_t n_vocab;
  int32_t token_bos;          /* -1 when none */
  int32_t token_eos;          /* -1 when none */
  int32_t is_diffusion;       /* 1: masked-diffusion LM (only chimera_generate runs on its contexts) */
  int64_t n_ctx_train;        /* context length it was trained with (0 when unknown) */
  int64_t n_ctx;              /* default context size of new contexts */
  int64_t n_embd;
  int64_t n_layer;
} chimera_model_info;

/* Strings stay valid while the model lives. */
CHIMERA_API chimera_status chimera_model_info_get(const chimera_model* model, chimera_model_info* out);

/* ------------------------------------------------------------ tokenizer */

/* Text -> ids. add_special: BOS/EOS as the vocabulary asks; parse_special: text spelling a special token
 * ("</s>", "<|im_end|>") becomes that token, else it is plain text. text need not be NUL-terminated. */
CHIMERA_API chimera_status chimera_tokenize(chimera_model* model, const char* text, size_t text_len,
                                            int add_special, int parse_special, int32_t* tokens,
                                            size_t capacity, size_t* n_tokens);
/* Ids -> text (bytes as the vocabulary has them). render_special: control tokens appear as their text.
 * Writes n_bytes + 1 bytes (a terminating NUL); capacity must allow that. Ids outside the vocabulary
 * are CHIMERA_ERR_INVALID_ARGUMENT. */
CHIMERA_API chimera_status chimera_detokenize(chimera_model* model, const int32_t* tokens, size_t n_tokens,
                                              int render_special, char* text, size_t capacity,
                                              size_t* n_bytes);
/* *out = 1 when token ends a generation (EOS, EOT, ...), else 0. */
CHIMERA_API chimera_status chimera_token_is_eog(chimera_model* model, int32_t token, int* out);

typedef struct chimera_chat_message {
  const char* role;     /* "system", "user", "assistant", ... */
  const char* content;  /* plain text */
} chimera_chat_message;

/* The conversation rendered with the model's chat template (a plain "role: content" format when the
 * model has none; an error when its template cannot be parsed). add_generation_prompt: end with the
 * assistant turn's opening. Output as chimera_detokenize (NUL-terminated). */
CHIMERA_API chimera_status chimera_chat_render(chimera_model* model, const chimera_chat_message* messages,
                                               size_t n_messages, int add_generation_prompt, char* text,
                                               size_t capacity, size_t* n_bytes);
/* The rendered conversation's ids, as the server builds them: the template's markers are special tokens,
 * message contents are plain text (special-token text typed into a message stays text). */
CHIMERA_API chimera_status chimera_chat_tokenize(chimera_model* model, const chimera_chat_message* messages,
                                                 size_t n_messages, int add_generation_prompt, int32_t* tokens,
                                                 size_t capacity, size_t* n_tokens);

/* --------------------------------------------------------------- contexts */

typedef struct chimera_context_params {
  size_t struct_size;
  int64_t n_ctx;  /* tokens this sequence can hold; 0 = the model's default */
} chimera_context_params;

CHIMERA_API void chimera_context_params_init(chimera_context_params* params);

/* A new, empty sequence on the model. params may be NULL. */
CHIMERA_API chimera_status chimera_context_create(chimera_model* model, const chimera_context_params* params,
                                                  chimera_context** out);
CHIMERA_API void chimera_context_free(chimera_context* ctx);
CHIMERA_API const char* chimera_context_last_error(const chimera_context* ctx);
/* Forgets the sequence. */
CHIMERA_API chimera_status chimera_context_reset(chimera_context* ctx);
/* Tokens in the sequence (*n_past) and its capacity (*n_ctx); either pointer may be NULL. */
CHIMERA_API chimera_status chimera_context_size(const chimera_context* ctx, int64_t* n_past, int64_t* n_ctx);

typedef enum chimera_logits_mode {
  CHIMERA_LOGITS_NONE = 0, /* no rows */
  CHIMERA_LOGITS_LAST = 1, /* one row: after the last token */
  CHIMERA_LOGITS_ALL = 2   /* one row per token: row i = after tokens[0..i] */
} chimera_logits_mode;

/* Appends tokens to the sequence and runs the model over them. logits gets the rows `mode` (a
 * chimera_logits_mode value; other values are refused) asks for,
 * n_vocab floats each (capacity in floats). Bad ids and context overflow are errors that leave the
 * sequence unchanged. Autoregressive models only. */
CHIMERA_API chimera_status chimera_decode(chimera_context* ctx, const int32_t* tokens, size_t n_tokens,
                                          int mode, float* logits, size_t capacity);

/* --------------------------------------------------------------- sampling */

/* The CLI's sampler chain: penalties -> top-k -> top-p -> min-p -> temperature -> seeded draw
 * (temperature 0 = greedy). Out-of-range values are refused, never clamped. */
typedef struct chimera_sampling_params {
  size_t struct_size;
  float temperature;        /* 0..100; 0 = greedy (default 0.8) */
  int32_t top_k;            /* >= 0; 0 = off (40) */
  float top_p;              /* 0..1; 1 = off (0.95) */
  float min_p;              /* 0..1; 0 = off (0.05) */
  float repeat_penalty;     /* (0, 100]; 1 = off (1) */
  float presence_penalty;   /* -100..100 (0) */
  float frequency_penalty;  /* -100..100 (0) */
  int32_t penalty_last_n;   /* tokens the penalties look back; -1 = all, 0 = off (64) */
  uint64_t seed;            /* same seed + same inputs = same tokens on any machine */
  const char* grammar;      /* GBNF grammar (llama.cpp syntax) the output must match, or NULL */
  const char* json_schema;  /* JSON Schema (text) the output must match, or NULL; not both */
} chimera_sampling_params;

/* The CLI's defaults. */
CHIMERA_API void chimera_sampling_params_init(chimera_sampling_params* params);

CHIMERA_API chimera_status chimera_sampler_create(chimera_model* model, const chimera_sampling_params* params,
                                                  chimera_sampler** out);
CHIMERA_API void chimera_sampler_free(chimera_sampler* sampler);
CHIMERA_API const char* chimera_sampler_last_error(const chimera_sampler* sampler);
/* Records tokens in the penalty history (e.g. the prompt); the grammar is not advanced. */
CHIMERA_API chimera_status chimera_sampler_accept(chimera_sampler* sampler, const int32_t* tokens, size_t n_tokens);
/* Clears the history, restarts the random sequence from the seed and the grammar from its start. */
CHIMERA_API chimera_status chimera_sampler_reset(chimera_sampler* sampler);
/* Draws the next token from the logits after ctx's last token and records it (history, grammar). It is
 * not fed: chimera_decode it to continue. With a grammar, *token = -1 when the grammar allows nothing
 * more. The context must hold at least one token; its model must be the sampler's. */
CHIMERA_API chimera_status chimera_sampler_sample(chimera_sampler* sampler, chimera_context* ctx, int32_t* token);

/* -------------------------------------------------------------- generation */

/* Called for every generated token with the text it completes (complete UTF-8; may be empty, never holds
 * a stop string or what follows it). After the last token it may be called once more with token -1 and
 * the rest of the text. Return 0 to go on, anything else to stop (finish reason CANCELLED). */
typedef int (*chimera_token_callback)(int32_t token, const char* text, size_t text_len, void* user_data);

typedef enum chimera_finish_reason {
  CHIMERA_FINISH_LENGTH = 0,       /* max_tokens generated */
  CHIMERA_FINISH_STOP = 1,         /* end-of-generation token, stop string, or the grammar is complete */
  CHIMERA_FINISH_CANCELLED = 2,    /* the callback returned non-zero, or chimera_context_cancel */
  CHIMERA_FINISH_CONTEXT_FULL = 3  /* the context has no room for another token */
} chimera_finish_reason;

typedef struct chimera_generate_params {
  size_t struct_size;
  int64_t max_tokens;                /* < 0: until end of generation or context end (default 128) */
  int32_t ignore_eos;                /* 1: do not stop at end-of-generation tokens */
  chimera_sampling_params sampling;
  const char* const* stop;           /* n_stop non-empty stop strings (may be NULL when n_stop is 0) */
  size_t n_stop;
  chimera_token_callback callback;   /* may be NULL */
  void* user_data;
} chimera_generate_params;

CHIMERA_API void chimera_generate_params_init(chimera_generate_params* params);

typedef struct chimera_generate_result {
  size_t struct_size;
  int64_t n_prompt;     /* tokens fed before generating */
  int64_t n_generated;  /* tokens passed to the callback */
  chimera_finish_reason finish_reason;
} chimera_generate_result;

/* Appends prompt (may be empty to continue the sequence) and generates. The sequence keeps the prompt
 * and the generated tokens, so a later call continues it (a chat turn feeds only its new tokens).
 * result may be NULL. */
CHIMERA_API chimera_status chimera_generate(chimera_context* ctx, const int32_t* prompt, size_t n_prompt,
                                            const chimera_generate_params* params,
                                            chimera_generate_result* result);
/* Asks the generation running on ctx to stop after the token being produced (thread-safe). It has no
 * effect on a later chimera_generate call. */
CHIMERA_API chimera_status chimera_context_cancel(chimera_context* ctx);

/* ------------------------------------------------------------ saved states */

/* The sequence (tokens, model state, last logits) as bytes: a versioned, checksummed format that
 * chimera_state_load validates completely (a truncated, corrupted or foreign blob is an error that
 * leaves the context unchanged). Restoring into a context of the same model continues exactly as the
 * saved one would have. Autoregressive models only. */
CHIMERA_API chimera_status chimera_state_save(chimera_context* ctx, uint8_t* data, size_t capacity,
                                              size_t* n_bytes);
CHIMERA_API chimera_status chimera_state_load(chimera_context* ctx, const uint8_t* data, size_t n_bytes);

#ifdef __cplusplus
}
#endif

#endif /* CHIMERA_H */
