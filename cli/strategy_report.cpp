#include "cli/strategy_report.hpp"

#include <nlohmann/json.hpp>

#include "properties/campaign_report.hpp"
#include "step/strategy.hpp"

namespace infonce::cli {
namespace {

using Json = nlohmann::ordered_json;
using properties::shell_word;
using properties::StrategyCell;

std::string xml_escaped(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

Json cell_json(const std::string& family, const std::string& point, const StrategyCell& cell) {
  return {{"family", family},
          {"point", point},
          {"cases", cell.cases},
          {"discarded", cell.discarded},
          {"near_ties", cell.near_ties},
          {"correct", cell.correct},
          {"ratio", cell.ratio},
          {"counterexamples", cell.counterexamples},
          {"no_counterexample", cell.no_counterexample},
          {"mismatched", cell.mismatched},
          {"direct_confirmed", cell.direct_confirmed},
          {"direct_one_number", cell.direct_one_number}};
}

// Every (family, point, cell) with cases, InfoNCE first, in all_strategies() order.
template <class F>
void for_each_cell(const properties::StrategyCampaignResult& r, F&& f) {
  const auto all = step::all_strategies();
  for (const char* family : {"infonce", "clip", "ntxent", "siglip"}) {
    const std::string name = family;
    const auto& cells = name == "clip"     ? r.clip_cells
                        : name == "ntxent" ? r.ntxent_cells
                        : name == "siglip" ? r.siglip_cells
                                           : r.cells;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (cells[i].cases > 0) f(std::string(family), step::name_of(all[i]), cells[i]);
    }
  }
}

std::string sut_options(const StrategyReport& r) {
  std::string options;
  if (r.sut_command) options += " --sut " + shell_word(*r.sut_command);
  if (r.sut_timeout) options += " --sut-timeout " + shell_word(*r.sut_timeout);
  return options;
}

}  // namespace

std::string strategy_replay_command(const StrategyReport& r, std::int64_t index) {
  std::string command = shell_word(r.program) + " check --strategies " + shell_word(r.point) +
                        " --seed " + std::to_string(r.seed) + " --case-index " +
                        std::to_string(index);
  if (r.family != "both") command += " --family " + r.family;
  if (r.limits != "default") command += " --limits " + r.limits;
  for (const std::string& option : r.restrict_options) {
    command += " --restrict " + shell_word(option);
  }
  return command + sut_options(r);
}

std::string strategy_file_command(const StrategyReport& r, const std::string& file) {
  return shell_word(r.program) + " check --strategies " + shell_word(r.point) + " --case " +
         shell_word(file) + sut_options(r);
}

namespace {

const StrategyReport::Shrunk* shrunk_of(const StrategyReport& r, const std::string& cause) {
  for (const StrategyReport::Shrunk& s : r.shrunk) {
    if (s.cause == cause) return &s;
  }
  return nullptr;
}

}  // namespace

void print_strategy_mismatches(std::ostream& out, const StrategyReport& r) {
  const properties::StrategyCampaignResult& result = r.result;
  out << "FAIL: " << result.mismatched() << " of " << result.cases
      << " cases differ; by cause (the first " << properties::MismatchGroup::kKept
      << " cases of each):\n";
  for (const auto& [cause, group] : result.mismatches_by_cause) {
    out << "  " << cause << ": " << group.count << (group.count == 1 ? " case\n" : " cases\n");
    for (const std::string& line : group.lines) out << "    " << line << "\n";
    if (group.count > static_cast<std::int64_t>(group.lines.size())) {
      out << "    ... " << group.count - static_cast<std::int64_t>(group.lines.size()) << " more\n";
    }
    out << "    reproduce: " << strategy_replay_command(r, group.indices.front()) << "\n";
    const StrategyReport::Shrunk* shrunk = shrunk_of(r, cause);
    if (shrunk == nullptr) continue;
    out << "    shrunk in " << shrunk->steps << " steps: " << shrunk->text << "\n      "
        << shrunk->detail << "\n";
    if (shrunk->saved.empty()) continue;
    out << "    saved: " << shrunk->saved
        << "\n    reproduce: " << strategy_file_command(r, shrunk->saved) << "\n";
  }
}

std::string strategy_report_json(const StrategyReport& r) {
  Json out;
  out["format"] = "infonce-strategy-report/1";
  out["seed"] = r.seed;
  out["cases"] = r.result.cases;
  out["limits"] = r.limits;
  out["strategies"] = r.point;
  out["family"] = r.family;
  out["sut"] = r.sut_command ? Json{{"command", *r.sut_command}, {"name", r.sut_name.value_or("")}}
                             : Json(nullptr);
  out["restricted"] = r.restricted_axes;
  out["passed"] = r.passed();
  Json cells = Json::array();
  for_each_cell(r.result,
                [&](const std::string& family, const std::string& point, const StrategyCell& cell) {
                  cells.push_back(cell_json(family, point, cell));
                });
  out["cells"] = std::move(cells);
  Json mismatches = Json::array();
  for (const auto& [cause, group] : r.result.mismatches_by_cause) {
    Json cases = Json::array();
    for (std::size_t i = 0; i < group.lines.size(); ++i) {
      cases.push_back({{"index", group.indices[i]},
                       {"line", group.lines[i]},
                       {"reproduce", strategy_replay_command(r, group.indices[i])}});
    }
    Json entry = {{"cause", cause}, {"count", group.count}, {"cases", std::move(cases)}};
    if (const StrategyReport::Shrunk* shrunk = shrunk_of(r, cause)) {
      entry["shrunk"] = {
          {"spec", shrunk->text},
          {"detail", shrunk->detail},
          {"steps", shrunk->steps},
          {"case_file", shrunk->saved.empty() ? Json(nullptr) : Json(shrunk->saved)},
          {"reproduce",
           shrunk->saved.empty() ? Json(nullptr) : Json(strategy_file_command(r, shrunk->saved))}};
    }
    mismatches.push_back(std::move(entry));
  }
  out["mismatches"] = std::move(mismatches);
  return out.dump(2) + "\n";
}

std::string strategy_report_junit(const StrategyReport& r) {
  std::string cases;
  std::int64_t tests = 0, failures = 0;
  for_each_cell(r.result, [&](const std::string& family, const std::string& point,
                              const StrategyCell& cell) {
    ++tests;
    const std::string name = family + " " + point;
    cases += "    <testcase classname=\"strategies\" name=\"" + xml_escaped(name) + "\">";
    if (cell.mismatched > 0) {
      ++failures;
      std::string lines;
      for (const auto& [cause, group] : r.result.mismatches_by_cause) {
        for (const std::string& line : group.lines) {
          if (line.find("(" + name + ")") != std::string::npos) lines += cause + ": " + line + "\n";
        }
      }
      cases += "<failure message=\"" + std::to_string(cell.mismatched) + " of " +
               std::to_string(cell.cases) + " cases differ\">" + xml_escaped(lines) + "</failure>";
    }
    cases += "</testcase>\n";
  });
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite "
         "name=\"infonce-sim strategy campaign\" tests=\"" +
         std::to_string(tests) + "\" failures=\"" + std::to_string(failures) + "\">\n" + cases +
         "  </testsuite>\n</testsuites>\n";
}

}  // namespace infonce::cli
