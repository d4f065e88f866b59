#include "apps/server/openai_request.h"

#include <cmath>
#include <limits>

#include "apps/server/api_error.h"

namespace era::server {
namespace {

using nlohmann::json;

// Upper bounds that match era_infer's flag bounds (docs/cli.md, "Flag bounds").
constexpr int64_t kMaxNewTokens = int64_t{1} << 24;
constexpr int64_t kMaxTokens = int64_t{1} << 20;
constexpr double kMaxTemperature = 100.0;

[[noreturn]] void bad(const std::string& field, const std::string& what) { throw ApiError(400, field + ": " + what, field); }

const char* type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return v.is_null()      ? "null"
         : v.is_string()  ? "a string"
         : v.is_boolean() ? "a boolean"
         : v.is_array()   ? "an array"
                          : "an object";
}

const std::string& get_string(const json& v, const std::string& field) {
  if (!v.is_string()) bad(field, std::string("must be a string, got ") + type_name(v));
  return v.get_ref<const std::string&>();
}

int64_t get_integer(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  // 3.0 is accepted as 3 (JSON has one number type); 3.5, 1e300 and true are not.
  int64_t n = 0;
  if (v.is_number_integer()) {
    // Above int64_t (an unsigned JSON integer): out of any range here. Not hi + 1, which
    // overflows when hi is the largest int64_t ("seed").
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
    n = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)) bad(field, "must be an integer, got " + v.dump());
    n = static_cast<int64_t>(d);
  } else {
    bad(field, std::string("must be an integer, got ") + type_name(v));
  }
  if (n < lo || n > hi)
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(n));
  return n;
}

double get_number(const json& v, const std::string& field, double lo, double hi, bool open_low = false) {
  if (!v.is_number()) bad(field, std::string("must be a number, got ") + type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (open_low && d <= lo)) {
    json l = lo, h = hi;
    bad(field, std::string("must be in ") + (open_low ? "(" : "[") + l.dump() + ", " + h.dump() + "], got " + v.dump());
  }
  return d;
}

bool get_bool(const json& v, const std::string& field) {
  if (!v.is_boolean()) bad(field, std::string("must be true or false, got ") + type_name(v));
  return v.get<bool>();
}

const json& get_object(const json& v, const std::string& field) {
  if (!v.is_object()) bad(field, std::string("must be an object, got ") + type_name(v));
  return v;
}

// One message's content: its text with "<image>" where each image part was, images appended to
// `images` in order.
std::string content_text(const json& content, const std::string& field, bool images_allowed, const std::string& role,
                         const ImageSourcePolicy& policy, std::vector<Image>& images) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(field, std::string("must be a string or an array of content parts, got ") + type_name(content));
  if (content.empty()) bad(field, "must not be an empty array");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part_field = field + "[" + std::to_string(j) + "]";
    const json& part = get_object(content[j], part_field);
    if (!part.contains("type")) bad(part_field + ".type", "is required (\"text\" or \"image_url\")");
    const std::string& type = get_string(part["type"], part_field + ".type");
    if (j > 0) text += "\n";
    if (type == "text") {
      if (!part.contains("text")) bad(part_field + ".text", "is required for a text part");
      text += get_string(part["text"], part_field + ".text");
    } else if (type == "image_url") {
      if (!images_allowed) bad(part_field + ".type", "a " + role + " message cannot hold images");
      if (!part.contains("image_url")) bad(part_field + ".image_url", "is required for an image_url part");
      const json& image_url = part["image_url"];
      std::string url_field = part_field + ".image_url";
      const std::string* url = nullptr;
      if (image_url.is_string()) {  // the older shorthand {"image_url": "data:..."}
        url = &image_url.get_ref<const std::string&>();
      } else {
        get_object(image_url, url_field);
        url_field += ".url";
        if (!image_url.contains("url")) bad(url_field, "is required");
        url = &get_string(image_url["url"], url_field);
        if (image_url.contains("detail") && !image_url["detail"].is_null())
          get_string(image_url["detail"], part_field + ".image_url.detail");  // accepted, no effect
      }
      try {
        images.push_back(policy.resolve(*url, url_field));
      } catch (const Error& e) {  // Image::from_encoded refusing the bytes
        bad(url_field, e.what());
      }
      text += "<image>";
    } else {
      bad(part_field + ".type", "unknown content part type '" + type + "' (use \"text\" or \"image_url\")");
    }
  }
  return text;
}

// A field the server does not implement: refused unless absent, null or its neutral value, so
// a client never silently gets something other than what it asked for.
void refuse_unsupported(const json& body) {
  const auto neutral = [&](const char* key, const json& fine) {
    if (body.contains(key) && !body[key].is_null() && body[key] != fine) bad(key, "is not supported by era_server");
  };
  for (const char* key : {"stop", "tools", "tool_choice", "functions", "function_call", "logit_bias", "top_logprobs", "audio",
                          "modalities", "prediction"})
    neutral(key, json(nullptr));
  neutral("logprobs", false);
  neutral("presence_penalty", 0);
  neutral("frequency_penalty", 0);
  if (body.contains("response_format") && !body["response_format"].is_null() && body["response_format"] != json{{"type", "text"}})
    bad("response_format", "is not supported by era_server (only {\"type\": \"text\"})");
  if (body.contains("n") && !body["n"].is_null() && get_integer(body["n"], "n", 0, std::numeric_limits<int64_t>::max()) != 1)
    bad("n", "only n = 1 is supported");
}

void apply_era_extension(const json& era, ReductionRequest& reduction, bool& stop_at_eos) {
  get_object(era, "era");
  for (const auto& [key, value] : era.items()) {
    const std::string field = "era." + key;
    if (key == "method") {
      reduction.method = get_string(value, field);
      try {
        method_info(reduction.method);
      } catch (const Error& e) {
        bad(field, e.what());
      }
    } else if (key == "tokens") {
      reduction.tokens = get_integer(value, field, 0, kMaxTokens);
    } else if (key == "keep_ratio") {
      reduction.keep_ratio = static_cast<float>(get_number(value, field, 0.0, 1.0));
    } else if (key == "scope") {
      reduction.scope = get_string(value, field);
      if (reduction.scope != "crop" && reduction.scope != "image") bad(field, "must be \"crop\" or \"image\"");
    } else if (key == "era_set" || key == "method_set") {
      if (!value.is_array()) bad(field, std::string("must be an array of \"key=value\" strings, got ") + type_name(value));
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string item_field = field + "[" + std::to_string(i) + "]";
        const std::string& kv = get_string(value[i], item_field);
        try {
          if (key == "era_set") set_era_option(reduction.era, kv);
          else set_baseline_option(reduction.baselines, kv);
        } catch (const Error& e) {
          bad(item_field, e.what());
        }
      }
    } else if (key == "ignore_eos") {
      stop_at_eos = !get_bool(value, field);
    } else {
      bad(field, "unknown field (known: method, tokens, keep_ratio, scope, era_set, method_set, ignore_eos)");
    }
  }
}

// The messages: system text, alternating user/assistant turns, the last user turn.
void apply_messages(const json& messages, Request& request, const ImageSourcePolicy& policy) {
  if (!messages.is_array()) bad("messages", std::string("must be an array, got ") + type_name(messages));
  if (messages.empty()) bad("messages", "must hold at least one user message");
  std::optional<std::string> system;
  std::vector<std::string> users, assistants;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const json& message = get_object(messages[i], field);
    if (!message.contains("role")) bad(field + ".role", "is required");
    const std::string& role = get_string(message["role"], field + ".role");
    if (!message.contains("content") || message["content"].is_null()) bad(field + ".content", "is required");
    const std::string content_field = field + ".content";
    if (role == "system" || role == "developer") {
      if (!users.empty()) bad(field + ".role", "a " + role + " message must come before the conversation");
      const std::string text = content_text(message["content"], content_field, false, role, policy, request.image_buffers);
      system = system ? *system + "\n" + text : text;
    } else if (role == "user") {
      if (users.size() != assistants.size()) bad(field + ".role", "expected an assistant message (user and assistant alternate)");
      users.push_back(content_text(message["content"], content_field, true, role, policy, request.image_buffers));
    } else if (role == "assistant") {
      if (users.size() != assistants.size() + 1)
        bad(field + ".role", "expected a user message (user and assistant alternate, user first)");
      assistants.push_back(content_text(message["content"], content_field, false, role, policy, request.image_buffers));
    } else {
      bad(field + ".role", "unsupported role '" + role + "' (system, user or assistant)");
    }
  }
  if (users.empty()) bad("messages", "must hold at least one user message");
  if (users.size() == assistants.size())
    bad("messages[" + std::to_string(messages.size() - 1) + "].role", "the last message must be a user message");
  for (size_t t = 0; t < assistants.size(); ++t) request.history.push_back(Turn{users[t], assistants[t]});
  request.prompt = users.back();
  request.system = system;
}

// Where the parser is, as the request spells a field ("messages[0].content[1].image_url"), kept
// from its callback's events: a value the parser itself refuses (a number beyond a double's
// range) is then refused naming its field like any other bad value.
class JsonPath {
 public:
  void on(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: frames_.push_back({false, 0, ""}); break;
      case json::parse_event_t::array_start: frames_.push_back({true, 0, ""}); break;
      case json::parse_event_t::key:
        if (!frames_.empty() && parsed.is_string()) frames_.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::value: element_done(); break;
    }
  }
  std::string str() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.array) out += "[" + std::to_string(f.index) + "]";
      else if (!f.key.empty()) out += (out.empty() ? "" : ".") + f.key;
    }
    return out;
  }

 private:
  struct Frame {
    bool array;
    size_t index;
    std::string key;
  };
  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json_body(const std::string& body) {
  // A depth limit: nlohmann's parser does not recurse, but nothing a chat request holds nests
  // this deep, and refusing early keeps huge nested bodies cheap.
  JsonPath path;
  const json::parser_callback_t track = [&path](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth)
      throw ApiError(400, "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    path.on(event, parsed);
    return true;
  };
  try {
    return json::parse(body, track);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {
    // out_of_range 406: a number such as 1e400 that no double holds ("number overflow parsing
    // '1e400'"). Well-formed JSON with a bad value: the client's fault (400), not the server's.
    std::string why = e.what();
    const size_t tag_end = why.find("] ");
    if (why.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) why = why.substr(tag_end + 2);
    if (e.id == 406) why += " (beyond the range of a double)";
    const std::string field = path.str();
    if (field.empty()) throw ApiError(400, "the request body holds a bad value: " + why);
    bad(field, why);
  }
}

ChatRequest parse_chat_request(const std::string& body, const Request& defaults, const ImageSourcePolicy& images,
                               const ModelInfo* model) {
  return parse_chat_request(parse_json_body(body), defaults, images, model);
}

ChatRequest parse_chat_request(const json& body, const Request& defaults, const ImageSourcePolicy& images,
                               const ModelInfo* model) {
  if (!body.is_object()) throw ApiError(400, std::string("the request body must be a JSON object, got ") + type_name(body));
  ChatRequest out;
  Request& r = out.request;
  r = defaults;
  r.on_text = nullptr;
  r.images.clear();
  r.image_buffers.clear();
  r.history.clear();
  r.use_template = true;
  const auto has = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };

  if (has("model")) out.model = get_string(body["model"], "model");
  refuse_unsupported(body);
  if (has("stream")) out.stream = get_bool(body["stream"], "stream");
  if (has("stream_options")) {
    const json& so = get_object(body["stream_options"], "stream_options");
    if (so.contains("include_usage") && !so["include_usage"].is_null())
      out.include_usage = get_bool(so["include_usage"], "stream_options.include_usage");
  }
  if (has("max_tokens")) r.max_new_tokens = get_integer(body["max_tokens"], "max_tokens", 0, kMaxNewTokens);
  if (has("max_completion_tokens")) {
    const int64_t n = get_integer(body["max_completion_tokens"], "max_completion_tokens", 0, kMaxNewTokens);
    if (has("max_tokens") && n != r.max_new_tokens) bad("max_completion_tokens", "differs from max_tokens (give one of them)");
    r.max_new_tokens = n;
  }
  if (has("temperature"))
    r.temperature = static_cast<float>(get_number(body["temperature"], "temperature", 0.0, kMaxTemperature));
  if (has("top_p")) r.top_p = static_cast<float>(get_number(body["top_p"], "top_p", 0.0, 1.0, true));
  if (has("seed")) r.seed = static_cast<uint64_t>(get_integer(body["seed"], "seed", 0, std::numeric_limits<int64_t>::max()));
  if (has("era")) apply_era_extension(body["era"], r.reduction, r.stop_at_eos);
  if (!body.contains("messages")) bad("messages", "is required");
  apply_messages(body["messages"], r, images);
  try {
    if (model) validate_request(r, *model);
    else validate_request(r);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "era");
  }
  return out;
}

}  // namespace era::server
