// The man page and the bash completion (`help-man`, `help-completion`,
// cli/manual.cpp) against what --help prints: every command has its man
// section, and every option of every command is in the man page and is
// offered by the completion when bash runs it.
#include <stdio.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

namespace fs = std::filesystem;

// The commands `infonce-sim --help` lists, e.g. "corpus replay".
std::vector<std::string> listed_commands() {
  const CliResult help = run_infonce_sim({"--help"});
  std::vector<std::string> commands;
  bool in_list = false;
  const std::regex entry("^  ([a-z-]+( [a-z-]+)?)  +\\S.*$");
  for (const std::string& line : lines_of(help.out)) {
    if (line == "commands:") {
      in_list = true;
      continue;
    }
    if (in_list && line.empty()) break;
    std::smatch match;
    if (in_list && std::regex_match(line, match, entry)) commands.push_back(match[1]);
  }
  return commands;
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The long options `<command> --help` prints in its option column.
std::vector<std::string> listed_options(const std::string& command) {
  std::vector<std::string> args = words_of(command);
  args.push_back("--help");
  const CliResult help = run_infonce_sim(args);
  EXPECT_EQ(help.exit_code, 0) << command;
  std::vector<std::string> options;
  const std::regex option_line("^  (-[a-z] \\[ )?--([a-z][a-z-]*).*$");
  for (const std::string& line : lines_of(help.out)) {
    std::smatch match;
    if (std::regex_match(line, match, option_line)) options.push_back(match[2]);
  }
  return options;
}

std::string upper(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return text;
}

std::string roff_dashes(const std::string& text) {
  std::string out;
  for (const char ch : text) out += ch == '-' ? std::string("\\-") : std::string(1, ch);
  return out;
}

bool contains(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// What bash's completion offers after `infonce-sim <words>` (the last word
// is the one being completed; "" for a new word).
std::vector<std::string> completion_of(const fs::path& script, std::vector<std::string> words) {
  const fs::path driver = script.parent_path() / "complete.sh";
  std::string array = "infonce-sim";
  for (const std::string& word : words) array += " \"" + word + "\"";
  write_text_file(driver, "source \"" + script.string() + "\"\nCOMP_WORDS=(" + array +
                              ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_infonce_sim\n"
                              "printf '%s\\n' \"${COMPREPLY[@]}\"\n");
  const std::string command = "bash \"" + driver.string() + "\" 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {"popen failed"};
  std::string out;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    out.append(buffer.data(), n);
  }
  ::pclose(pipe);
  return lines_of(out);
}

TEST(ManPage, HasASectionForEveryCommandAndEveryOption) {
  const CliResult man = run_infonce_sim({"help-man"});
  ASSERT_EQ(man.exit_code, 0) << man.err;
  EXPECT_TRUE(man.out.find(".TH INFONCE\\-SIM 1 ") != std::string::npos) << man.out;
  const std::vector<std::string> commands = listed_commands();
  ASSERT_GE(commands.size(), 10u);
  for (const std::string& command : commands) {
    const std::string section = ".SH \"INFONCE\\-SIM " + upper(roff_dashes(command)) + "\"\n";
    const std::size_t at = man.out.find(section);
    ASSERT_NE(at, std::string::npos) << "no section for " << command;
    const std::size_t end = man.out.find("\n.SH ", at + section.size());
    const std::string body = man.out.substr(at, end - at);
    const std::vector<std::string> options = listed_options(command);
    EXPECT_FALSE(options.empty()) << command;
    for (const std::string& option : options) {
      EXPECT_NE(body.find(".TP\n\\fB\\-\\-" + roff_dashes(option) + "\\fR"), std::string::npos)
          << command << " --" << option;
    }
  }
  for (const char* code : {"0", "1", "2", "3", "4", "130"}) {
    EXPECT_NE(man.out.find(".TP\n.B " + std::string(code) + "\n"), std::string::npos) << code;
  }
}

TEST(ManPage, WrittenToAFileIsTheSameBytes) {
  const fs::path dir = fresh_work_dir("man-page");
  const CliResult to_file = run_infonce_sim({"help-man", (dir / "infonce-sim.1").string()});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");
  std::ifstream in(dir / "infonce-sim.1", std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), run_infonce_sim({"help-man"}).out);
  EXPECT_EQ(run_infonce_sim({"help-man", "a", "b"}).exit_code, 2);
}

TEST(BashCompletion, OffersEveryCommandAndEveryOption) {
  if (std::system("bash -c true > /dev/null 2>&1") != 0) GTEST_SKIP() << "no bash";
  const fs::path dir = fresh_work_dir("completion");
  const fs::path script = dir / "infonce-sim";
  ASSERT_EQ(run_infonce_sim({"help-completion", script.string()}).exit_code, 0);
  const std::vector<std::string> first = completion_of(script, {""});
  for (const std::string& command : listed_commands()) {
    const std::vector<std::string> words = words_of(command);
    EXPECT_TRUE(contains(first, words[0])) << command;
    if (words.size() == 2) {
      EXPECT_TRUE(contains(completion_of(script, {words[0], ""}), words[1])) << command;
    }
    std::vector<std::string> typed = words;
    typed.push_back("--");
    const std::vector<std::string> offered = completion_of(script, typed);
    for (const std::string& option : listed_options(command)) {
      EXPECT_TRUE(contains(offered, "--" + option)) << command << " --" << option;
    }
  }
  // A value with listed choices completes to them.
  EXPECT_EQ(completion_of(script, {"check", "--format", ""}),
            (std::vector<std::string>{"human", "json", "junit"}));
}

}  // namespace
}  // namespace infonce::cli_test
