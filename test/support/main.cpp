// The doctest main of every test program, with one guard: a run filtered to test cases by name (as ctest runs each
// TEST_CASE) that matches none fails instead of passing with nothing run. (CMake splits a test name at ';', so a
// TEST_CASE named with one used to become two ctest entries that each ran nothing and passed.)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {

int matched = -1;

struct match_counter : doctest::IReporter {
  explicit match_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { matched = static_cast<int>(s.numTestCasesPassingFilters); }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("match_counter", 1, match_counter);

bool filters_by_name(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const char* p : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="})
      if (std::strncmp(argv[i], p, std::strlen(p)) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  if (result == 0 && matched == 0 && filters_by_name(argc, argv)) {
    std::fprintf(stderr, "no test case matches the --test-case filter: nothing was run\n");
    return 1;
  }
  return result;
}
