//===- llmc-tokenize.cpp - a Hugging Face model's tokenizer ---------------===//
//
// Text to ids and back with the tokenizer llmc loads from a model directory
// (runtime/data/Tokenizer.h), to see what a prompt becomes and to compare
// with transformers (test/reference/hf_tokenizer.py).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BpeTokenizer.h"
#include "runtime/support/Json.h"

#include <climits>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>

namespace {

const char *kUsage = R"(usage: llmc-tokenize <hf-dir> [--bos] [TEXT...]
       llmc-tokenize <hf-dir> --decode ID...
       llmc-tokenize <hf-dir> --info | --json

The tokenizer of a Hugging Face model directory (tokenizer.json, or
vocab.json + merges.txt; docs/huggingface.md).

  TEXT...         print the ids of each TEXT on a line (of all of stdin when
                  there is none), without special tokens: the input of
                  `llmc data --from ids`
  --bos           start each line with the token the tokenizer starts
                  sequences with (Llama's <s>; GPT-2 has none)
  --decode ID...  print the text of the ids
  --info          print vocab_size, bos and eos (an id or "none")
  --json          read a JSON array of strings from stdin and print
                  {"vocab_size", "bos", "eos", "ids": [[...], ...], "text": [...],
                  "words": [[...], ...]}: text[i] is the decoded ids[i], words[i]
                  the pieces BPE ran on (after added tokens, normalization and
                  pre-tokenization)
)";

llmc::json::Value idArray(const std::vector<int32_t> &ids) {
  llmc::json::Value a = llmc::json::Value::array();
  for (int32_t id : ids)
    a.push(llmc::json::Value(static_cast<int64_t>(id)));
  return a;
}

void printIds(const std::vector<int32_t> &ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 1 : 0;
  }
  try {
    std::unique_ptr<llmc::Tokenizer> tok = llmc::loadTokenizer(args[0]);
    if (args.size() > 1 && args[1] == "--decode") {
      std::vector<int32_t> ids;
      for (size_t i = 2; i < args.size(); ++i) {
        char *end = nullptr;
        long long id = std::strtoll(args[i].c_str(), &end, 10);
        if (args[i].empty() || *end != '\0' || id < INT32_MIN || id > INT32_MAX)
          throw std::runtime_error("--decode: '" + args[i] + "' is not a token id");
        ids.push_back(static_cast<int32_t>(id));
      }
      std::cout << tok->decode(ids);
      return 0;
    }
    if (args.size() > 1 && args[1] == "--json") {
      std::string input((std::istreambuf_iterator<char>(std::cin)),
                        std::istreambuf_iterator<char>());
      llmc::json::Value texts = llmc::json::parse(input, "stdin");
      llmc::json::Value out = llmc::json::Value::object(), ids = llmc::json::Value::array(),
                        decoded = llmc::json::Value::array(), words = llmc::json::Value::array();
      auto *bpe = dynamic_cast<const llmc::BpeTokenizer *>(tok.get());
      for (const llmc::json::Value &text : texts.asArray("stdin")) {
        std::vector<int32_t> encoded = tok->encode(text.asString("stdin: each item"));
        ids.push(idArray(encoded));
        decoded.push(tok->decode(encoded));
        llmc::json::Value pieces = llmc::json::Value::array();
        for (const std::string &word : bpe->words(text.asString()))
          pieces.push(word);
        words.push(std::move(pieces));
      }
      out.set("vocab_size", tok->vocabSize());
      out.set("bos", tok->bosId ? llmc::json::Value(static_cast<int64_t>(*tok->bosId))
                                : llmc::json::Value());
      out.set("eos", tok->eosId ? llmc::json::Value(static_cast<int64_t>(*tok->eosId))
                                : llmc::json::Value());
      out.set("ids", std::move(ids));
      out.set("text", std::move(decoded));
      out.set("words", std::move(words));
      std::cout << out.dump() << "\n";
      return 0;
    }
    auto none = [](std::optional<int32_t> id) { return id ? std::to_string(*id) : "none"; };
    if (args.size() == 2 && args[1] == "--info") {
      std::cout << "vocab_size " << tok->vocabSize() << "\nbos " << none(tok->bosId) << "\neos "
                << none(tok->eosId) << "\n";
      return 0;
    }
    size_t first = 1;
    bool bos = args.size() > 1 && args[1] == "--bos";
    if (bos) {
      if (!tok->bosId)
        throw std::runtime_error("--bos: this tokenizer starts sequences with no token");
      ++first;
    }
    auto print = [&](const std::string &text) {
      std::vector<int32_t> ids = tok->encode(text);
      if (bos)
        ids.insert(ids.begin(), *tok->bosId);
      printIds(ids);
    };
    if (args.size() == first)
      print(
          std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()));
    for (size_t i = first; i < args.size(); ++i)
      print(args[i]);
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "llmc-tokenize: " << e.what() << "\n";
    return 1;
  }
}
