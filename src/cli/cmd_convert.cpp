// `chimera convert`: imports a model from another format into GGUF.
//   chimera convert --from llama2c MODEL.bin --vocab TOK.bin -o OUT.gguf
//   chimera convert HF_DIR -o OUT.gguf [--type f32|f16|bf16|Q8_0|Q4_K_M|TQ2_0|...]   (a directory: Hugging Face)
// Sources are rows of a small importer table (name, usage, optional
// auto-detection, run function); adding a source (a Hugging Face directory,
// bitnet-llama2c, ...) is one function plus one row. Options that only some
// importers use live in ConvertRequest; each importer checks the ones it needs.
// Invariants: an unknown --from lists the supported sources; progress (tensor
// names and shapes) goes to stderr; errors print "error: ..." and exit 1, and a
// failed conversion leaves no output file behind.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "format/bitnet_llama2c/bitnet_llama2c.h"
#include "format/hf/hf_convert.h"
#include "format/llama2c/llama2c.h"
#include "models/model.h"

namespace chimera::cli {
namespace {

struct ConvertRequest {
  std::string from;    // importer name; empty: auto-detect
  std::string input;   // positional: model file or directory
  std::string vocab;   // --vocab (llama2c)
  std::string output;  // -o
  std::string name;    // --name: general.name
  uint32_t ctx = 0;    // --ctx: llama.context_length override (0: the source's)
  std::string type;    // --type (hf): f32|f16|bf16 or a `quantize` type; empty: the checkpoint's
  bool quiet = false;
};

struct Importer {
  const char* name;
  const char* usage;  // one line for --help and error messages
  // Recognises an input without --from (nullptr: never guessed, e.g. raw
  // formats with no magic number).
  bool (*detect)(const std::string& input);
  Status (*run)(const ConvertRequest& req);
};

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string file_stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

Status import_llama2c(const ConvertRequest& req) {
  if (req.vocab.empty())
    return invalid_argument("--from llama2c needs the tokenizer: --vocab TOKENIZER.bin (llama2.c format)");
  format::llama2c::ConvertOptions opts;
  opts.name = req.name.empty() ? file_stem(req.input) : req.name;
  opts.context_length = req.ctx;
  opts.check = &models::check_model_header;
  if (!req.quiet) {
    opts.progress = [](const format::llama2c::TensorPlan& t) {
      std::fprintf(stderr, "  %-28s %-14s F32\n", t.name.c_str(), shape_string(t.ne).c_str());
    };
    std::fprintf(stderr, "converting llama2.c checkpoint '%s' with vocabulary '%s'\n", req.input.c_str(),
                 req.vocab.c_str());
  }
  return format::llama2c::convert(req.input, req.vocab, req.output, opts);
}

Status import_bitnet_llama2c(const ConvertRequest& req) {
  if (req.vocab.empty())
    return invalid_argument("--from bitnet-llama2c needs the tokenizer: --vocab TOKENIZER.bin (llama2.c format)");
  format::bitnet_llama2c::ConvertOptions opts;
  opts.name = req.name.empty() ? file_stem(req.input) : req.name;
  opts.context_length = req.ctx;
  opts.check = &models::check_model_header;
  if (!req.quiet)
    opts.progress = [](const std::string& n, const std::vector<int64_t>& ne, const char* type) {
      std::fprintf(stderr, "  %-28s %-14s %s\n", n.c_str(), shape_string(ne).c_str(), type);
    };
  return format::bitnet_llama2c::convert(req.input, req.vocab, req.output, opts);
}

bool is_hf_dir(const std::string& input) { return std::filesystem::is_directory(input); }

Status import_hf(const ConvertRequest& req) {
  format::hf::ConvertOptions opts;
  std::string lower = req.type;
  for (char& c : lower) c = (char)std::tolower((unsigned char)c);
  const bool float_type = lower == "f32" || lower == "f16" || lower == "bf16";
  opts.out_type = float_type ? lower : req.type;
  opts.name = req.name;
  opts.check = &models::check_model_header;
  // A quantized --type: convert at the checkpoint's float type into a
  // temporary file next to the output, then quantize it (llama.cpp's rules).
  const quant::QuantMix* mix = nullptr;
  if (!float_type && !req.type.empty()) {
    mix = quant::find_quant_mix(req.type);
    if (!mix)
      return invalid_argument("--type must be f32, f16, bf16 or a quantization type (" + quant::quant_mix_names() +
                              "), got '" + req.type + "'");
    opts.out_type.clear();
  }
  if (!req.quiet) {
    opts.progress = [](const std::string& name, const std::vector<int64_t>& ne, format::GgmlType t) {
      std::fprintf(stderr, "  %-36s %-18s %s\n", name.c_str(), shape_string(ne).c_str(),
                   format::ggml_type_name(t).c_str());
    };
    std::fprintf(stderr, "converting Hugging Face checkpoint '%s'\n", req.input.c_str());
  }
  if (!mix) return format::hf::convert(req.input, req.output, opts);
  const std::string tmp = req.output + ".unquantized.partial";
  Status s = format::hf::convert(req.input, tmp, opts);
  if (s) {
    if (!req.quiet) std::fprintf(stderr, "quantizing to %s\n", std::string(mix->name).c_str());
    auto r = quantize_file(tmp, req.output, *mix, req.quiet);
    if (!r) s = r.status();
  }
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return s;
}

const Importer kImporters[] = {
    {"hf", "Hugging Face folder (config.json, *.safetensors, tokenizer.json): HF_DIR [--type f32|f16|bf16|Q8_0|Q4_K_M|...]",
     &is_hf_dir, &import_hf},
    {"llama2c", "llama2.c legacy checkpoint: --from llama2c MODEL.bin --vocab TOKENIZER.bin", nullptr,
     &import_llama2c},
    {"bitnet-llama2c", "ternary llama2.c checkpoint: --from bitnet-llama2c MODEL.bin --vocab TOKENIZER.bin", nullptr,
     &import_bitnet_llama2c},
};

std::string supported_list() {
  std::string s;
  for (const Importer& imp : kImporters) s += std::string(s.empty() ? "" : ", ") + imp.name;
  return s;
}

std::string usage_lines() {
  std::string s;
  for (const Importer& imp : kImporters) s += std::string("\n  ") + imp.name + ": " + imp.usage;
  return s;
}

int run(const ConvertRequest& req_in) {
  ConvertRequest req = req_in;
  const Importer* chosen = nullptr;
  if (req.from.empty()) {
    for (const Importer& imp : kImporters) {
      if (imp.detect && imp.detect(req.input)) {
        chosen = &imp;
        break;
      }
    }
    if (!chosen)
      return report_error("cannot tell the format of '" + req.input + "'; pass --from (supported: " +
                          supported_list() + ")" + usage_lines());
  } else {
    for (const Importer& imp : kImporters) {
      if (req.from == imp.name) chosen = &imp;
    }
    if (!chosen)
      return report_error("unknown source format '" + req.from + "' for --from (supported: " + supported_list() +
                          ")" + usage_lines());
  }
  if (!std::filesystem::exists(req.input)) return report_error("input '" + req.input + "' does not exist");
  Status st = chosen->run(req);
  if (!st) return report_error(st);
  if (!req.quiet) std::fprintf(stderr, "wrote %s\n", req.output.c_str());
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto req = std::make_shared<ConvertRequest>();
  CLI::App* sub = app.add_subcommand("convert", "Import a model from another format into GGUF");
  sub->footer("Sources:" + usage_lines());
  sub->add_option("input", req->input, "Model file or directory to import")->required();
  sub->add_option("--from", req->from, "Source format (" + supported_list() + ")");
  sub->add_option("--vocab", req->vocab, "Tokenizer file (llama2c: tokenizer.bin format)");
  sub->add_option("-o,--output", req->output, "Output GGUF file")->required();
  sub->add_option("--name", req->name, "general.name (default: the input's file name)");
  sub->add_option("--ctx", req->ctx,
                  "llama.context_length to record (default: the source's training context)");
  sub->add_option("--type", req->type,
                  "hf: output weight type f32|f16|bf16, or a quantization type as `chimera quantize` takes it "
                  "(Q8_0, Q4_K_M, TQ2_0, ...; converted then quantized in one run); default: the checkpoint's");
  sub->add_flag("-q,--quiet", req->quiet, "No progress output");
  sub->callback([req] { set_exit_code(run(*req)); });
}

}  // namespace chimera::cli
