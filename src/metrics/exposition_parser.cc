#include "metrics/exposition_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "metrics/metric_names.h"

namespace tessera::metrics {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// Reads one line of the format, left to right, reporting errors at the current column.
class LineReader {
 public:
  LineReader(std::string_view line, size_t line_number) : line_(line), line_number_(line_number) {}

  absl::Status Error(std::string_view what) const { return ErrorAt(at_, what); }
  absl::Status ErrorAt(size_t offset, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_number_, ", column ", offset + 1, ": ", ToAbsl(what)));
  }

  bool AtEnd() const { return at_ >= line_.size(); }
  char Peek() const { return AtEnd() ? '\0' : line_[at_]; }
  size_t offset() const { return at_; }
  void Advance() { ++at_; }
  // Skips blanks and tabs; false when there were none.
  bool SkipBlanks() {
    const size_t start = at_;
    while (!AtEnd() && IsBlank(line_[at_])) ++at_;
    return at_ > start;
  }
  // The run of characters up to the next blank (or the end).
  std::string_view Word() {
    const size_t start = at_;
    while (!AtEnd() && !IsBlank(line_[at_])) ++at_;
    return line_.substr(start, at_ - start);
  }
  std::string_view Rest() {
    std::string_view rest = line_.substr(std::min(at_, line_.size()));
    at_ = line_.size();
    return rest;
  }

  absl::StatusOr<std::string> MetricName() {
    const size_t start = at_;
    if (AtEnd() || !(IsNameStart(line_[at_]) || line_[at_] == ':')) {
      return Error("expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
    }
    while (!AtEnd() && IsMetricNameChar(line_[at_])) ++at_;
    return std::string(line_.substr(start, at_ - start));
  }

  absl::StatusOr<std::string> LabelName() {
    const size_t start = at_;
    if (AtEnd() || !IsNameStart(line_[at_])) {
      return Error("expected a label name ([a-zA-Z_][a-zA-Z0-9_]*)");
    }
    while (!AtEnd() && IsLabelNameChar(line_[at_])) ++at_;
    return std::string(line_.substr(start, at_ - start));
  }

  // A quoted label value, the opening quote at the current column.
  absl::StatusOr<std::string> LabelValue() {
    if (Peek() != '"') return Error("expected '\"' to open the label value");
    Advance();
    std::string value;
    while (true) {
      if (AtEnd()) return Error("the label value is not closed with '\"'");
      const char c = line_[at_];
      if (c == '"') {
        Advance();
        return value;
      }
      if (c == '\\') {
        Advance();
        const char escaped = Peek();
        if (escaped == '\\' || escaped == '"') {
          value += escaped;
        } else if (escaped == 'n') {
          value += '\n';
        } else {
          return ErrorAt(at_ - 1, "unknown escape in a label value (only \\\\ \\\" \\n)");
        }
        Advance();
        continue;
      }
      value += c;
      Advance();
    }
  }

 private:
  const std::string_view line_;
  const size_t line_number_;
  size_t at_ = 0;
};

// HELP text: \\ and \n are escapes; any other backslash stands for itself.
std::string UnescapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '\\' || text[i + 1] == 'n')) {
      out += text[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool IsKnownType(std::string_view type) {
  return type == "counter" || type == "gauge" || type == "histogram" || type == "summary" ||
         type == "untyped";
}

Labels Sorted(Labels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}

std::string SeriesKey(const std::string& name, const Labels& labels) {
  std::string key = name;
  for (const auto& [label, value] : Sorted(labels)) {
    // A NUL cannot occur in names; lengths make the key unambiguous for any value.
    absl::StrAppend(&key, std::string(1, '\0'), label, "=", value.size(), ":", value);
  }
  return key;
}

class Parser {
 public:
  absl::StatusOr<ParsedExposition> Parse(std::string_view text) {
    size_t line_number = 0;
    size_t start = 0;
    while (start < text.size()) {
      ++line_number;
      const size_t end = text.find('\n', start);
      if (end == std::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ", column ", text.size() - start + 1,
                         ": the last line does not end with \"\\n\""));
      }
      const std::string_view line = text.substr(start, end - start);
      if (const size_t bad = FirstInvalidUtf8(line); bad != std::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ", column ", bad + 1, ": not UTF-8"));
      }
      TESSERA_RETURN_IF_ERROR(ParseLine(LineReader(line, line_number)));
      start = end + 1;
    }
    return std::move(result_);
  }

 private:
  absl::Status ParseLine(LineReader line) {
    line.SkipBlanks();
    if (line.AtEnd()) return absl::OkStatus();
    if (line.Peek() == '#') return ParseComment(line);
    return ParseSample(line);
  }

  absl::Status ParseComment(LineReader& line) {
    line.Advance();  // '#'
    line.SkipBlanks();
    const std::string_view keyword = line.Word();
    if (keyword != "HELP" && keyword != "TYPE") return absl::OkStatus();  // a plain comment
    if (!line.SkipBlanks())
      return line.Error(absl::StrCat("expected a metric name after ", ToAbsl(keyword)));
    const size_t name_at = line.offset();
    TESSERA_ASSIGN_OR_RETURN(std::string name, line.MetricName());
    if (!line.AtEnd() && !IsBlank(line.Peek())) {
      return line.Error("expected a blank after the metric name");
    }
    line.SkipBlanks();
    if (keyword == "HELP") {
      if (result_.help.count(name) > 0) {
        return line.ErrorAt(name_at, absl::StrCat("a second HELP for ", name));
      }
      result_.help[name] = UnescapeHelp(line.Rest());
      return absl::OkStatus();
    }
    const size_t type_at = line.offset();
    const std::string_view type = line.Word();
    line.SkipBlanks();
    if (!IsKnownType(type)) {
      return line.ErrorAt(type_at, absl::StrCat("unknown metric type ", Quote(type),
                                                " (counter, gauge, histogram, summary, untyped)"));
    }
    if (!line.AtEnd()) return line.Error("unexpected text after the metric type");
    if (result_.types.count(name) > 0) {
      return line.ErrorAt(name_at, absl::StrCat("a second TYPE for ", name));
    }
    std::vector<std::string> family_names = {name};
    if (type == "histogram" || type == "summary") {
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        family_names.push_back(name + suffix);
    }
    for (const std::string& sample_name : family_names) {
      if (sample_names_.count(sample_name) > 0) {
        return line.ErrorAt(name_at,
                            absl::StrCat("the TYPE for ", name, " comes after its samples"));
      }
    }
    result_.types[name] = std::string(type);
    return absl::OkStatus();
  }

  absl::Status ParseSample(LineReader& line) {
    ParsedSample sample;
    TESSERA_ASSIGN_OR_RETURN(sample.name, line.MetricName());
    bool blank_before_value = line.SkipBlanks();
    if (line.Peek() == '{') {
      line.Advance();
      TESSERA_RETURN_IF_ERROR(ParseLabels(line, sample.labels));
      blank_before_value = line.SkipBlanks();
    }
    if (!blank_before_value) {
      return line.AtEnd() ? line.Error("expected a value")
                          : line.Error("expected a blank before the value");
    }
    const size_t value_at = line.offset();
    const std::string_view value = line.Word();
    if (value.empty()) return line.Error("expected a value");
    const std::optional<double> parsed = ParsePrometheusValue(value);
    if (!parsed.has_value()) {
      return line.ErrorAt(value_at, absl::StrCat("not a number: ", Quote(value)));
    }
    sample.value = *parsed;
    line.SkipBlanks();
    if (!line.AtEnd()) {
      const size_t timestamp_at = line.offset();
      const std::string_view timestamp = line.Word();
      int64_t ms = 0;
      const auto [end, ec] =
          std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ms);
      if (ec != std::errc() || end != timestamp.data() + timestamp.size()) {
        return line.ErrorAt(timestamp_at,
                            absl::StrCat("not an int64 timestamp: ", Quote(timestamp)));
      }
      sample.timestamp_ms = ms;
      line.SkipBlanks();
      if (!line.AtEnd()) return line.Error("unexpected text after the timestamp");
    }
    if (!series_.insert(SeriesKey(sample.name, sample.labels)).second) {
      return line.ErrorAt(0, absl::StrCat("a second sample of the same series of ", sample.name));
    }
    sample_names_.insert(sample.name);
    result_.samples.push_back(std::move(sample));
    return absl::OkStatus();
  }

  // After '{', through the closing '}'.
  absl::Status ParseLabels(LineReader& line, Labels& labels) {
    while (true) {
      line.SkipBlanks();
      if (line.Peek() == '}') {
        line.Advance();
        return absl::OkStatus();
      }
      const size_t name_at = line.offset();
      TESSERA_ASSIGN_OR_RETURN(std::string name, line.LabelName());
      for (const auto& [existing, unused] : labels) {
        if (existing == name)
          return line.ErrorAt(name_at, absl::StrCat("label ", name, " appears twice"));
      }
      line.SkipBlanks();
      if (line.Peek() != '=') return line.Error(absl::StrCat("expected '=' after label ", name));
      line.Advance();
      line.SkipBlanks();
      TESSERA_ASSIGN_OR_RETURN(std::string value, line.LabelValue());
      labels.emplace_back(std::move(name), std::move(value));
      line.SkipBlanks();
      if (line.Peek() == ',') {
        line.Advance();
        continue;
      }
      if (line.Peek() != '}') return line.Error("expected ',' or '}' after a label value");
    }
  }

  ParsedExposition result_;
  std::set<std::string> series_;        // SeriesKey of every sample so far
  std::set<std::string> sample_names_;  // every sample name so far
};

}  // namespace

std::optional<double> ParsePrometheusValue(std::string_view text) {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  const std::string lower = absl::AsciiStrToLower(ToAbsl(body));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (lower == "inf" || lower == "infinity") return negative ? -kInf : kInf;
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (end != body.data() + body.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Like Go's ParseFloat: too large is an error, too small rounds toward zero.
    const std::string copy(body);
    value = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(value)) return std::nullopt;
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return negative ? -value : value;
}

std::optional<double> ParsedExposition::Value(
    std::string_view name, std::vector<std::pair<std::string, std::string>> labels) const {
  const Labels wanted = Sorted(std::move(labels));
  for (const ParsedSample& sample : samples) {
    if (sample.name == name && Sorted(sample.labels) == wanted) return sample.value;
  }
  return std::nullopt;
}

absl::StatusOr<ParsedExposition> ParsePrometheusText(std::string_view text) {
  return Parser().Parse(text);
}

}  // namespace tessera::metrics
