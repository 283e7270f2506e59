// A small JSON Schema (draft-07 subset) checker for the CLI tests: type (incl. lists), required,
// properties, items, enum, minimum, maximum. Returns the first violation with its JSON path.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace epx::topo::test {

inline bool typeMatches(const nlohmann::json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

inline std::string validate(const nlohmann::json& v, const nlohmann::json& s, const std::string& at = "$") {
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_array()) {
      for (const auto& t : s["type"]) ok |= typeMatches(v, t.get<std::string>());
    } else {
      ok = typeMatches(v, s["type"].get<std::string>());
    }
    if (!ok) return at + ": expected type " + s["type"].dump() + ", got " + v.dump();
  }
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found |= e == v;
    if (!found) return at + ": " + v.dump() + " not in " + s["enum"].dump();
  }
  if (v.is_number() && s.contains("minimum") && v.get<double>() < s["minimum"].get<double>())
    return at + ": below minimum";
  if (v.is_number() && s.contains("maximum") && v.get<double>() > s["maximum"].get<double>())
    return at + ": above maximum";
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& k : s["required"])
        if (!v.contains(k.get<std::string>())) return at + ": missing " + k.get<std::string>();
    if (s.contains("properties"))
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it)
        if (v.contains(it.key()))
          if (auto e = validate(v[it.key()], it.value(), at + "." + it.key()); !e.empty()) return e;
  }
  if (v.is_array() && s.contains("items"))
    for (size_t i = 0; i < v.size(); ++i)
      if (auto e = validate(v[i], s["items"], at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
  return "";
}

}  // namespace epx::topo::test
