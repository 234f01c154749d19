package dev.dlock;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every scenario of tests/clients/scenarios.json on each backend it names that
 * DLOCK_CLIENT_BACKENDS lists (comma-separated, default sqlite,pg,etcd), each against one harness
 * (tests/clients/harness.cc) started once per backend. DLOCK_TEST_FILTER: comma-separated
 * substrings of the case names ({@code <scenario>-<backend>}); a case runs when it contains one.
 */
@Tag("scenarios")
class ScenarioTest {
  private static final Map<String, Harness> HARNESSES = new LinkedHashMap<>();

  @TempDir static Path tmp;

  static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  private static Harness harness(String backend) throws IOException {
    synchronized (HARNESSES) {
      Harness harness = HARNESSES.get(backend);
      if (harness == null) {
        String binary =
            env("DLOCK_CLIENT_HARNESS", "../../build/tests/clients/dlock_client_harness");
        harness = new Harness(binary, backend);
        HARNESSES.put(backend, harness);
      }
      return harness;
    }
  }

  @AfterAll
  static void stopHarnesses() throws IOException {
    for (Harness harness : HARNESSES.values()) {
      harness.close();
    }
    HARNESSES.clear();
  }

  @SuppressWarnings("unchecked")
  @TestFactory
  Stream<DynamicTest> scenarios() throws IOException {
    Path file = Path.of(env("DLOCK_CLIENT_SCENARIOS", "../../tests/clients/scenarios.json"));
    Map<String, Object> document = Json.parseObject(Files.readString(file));
    if (!Long.valueOf(1).equals(document.get("format"))) {
      throw new IllegalStateException("this runner reads format 1 of the scenario list");
    }
    List<String> backends =
        Arrays.asList(env("DLOCK_CLIENT_BACKENDS", "sqlite,pg,etcd").split(","));
    String filter = env("DLOCK_TEST_FILTER", "");
    List<DynamicTest> cases = new ArrayList<>();
    for (Map<String, Object> scenario : Json.objects(document, "scenarios")) {
      for (Object backend : (List<Object>) scenario.get("backends")) {
        String name = scenario.get("name") + "-" + backend;
        if (!backends.contains(backend) || !selected(name, filter)) {
          continue;
        }
        cases.add(DynamicTest.dynamicTest(name, () -> run(scenario, (String) backend)));
      }
    }
    if (cases.isEmpty() && !filter.isEmpty()) {
      // scripts/mutation-check reads this line: a row whose filter matches nothing is broken.
      System.out.println("DLOCK_TEST_FILTER selected no test");
      fail("DLOCK_TEST_FILTER selected no test");
    }
    return cases.stream();
  }

  static boolean selected(String name, String filter) {
    if (filter.isEmpty()) {
      return true;
    }
    return Arrays.stream(filter.split(","))
        .anyMatch(part -> !part.isBlank() && name.contains(part.strip()));
  }

  private static void run(Map<String, Object> scenario, String backend) throws Exception {
    Harness harness = harness(backend);
    Path dir = Files.createTempDirectory(tmp, "run");
    ScenarioRun run = new ScenarioRun(harness, scenario, dir);
    try {
      run.run();
    } finally {
      try {
        harness.bringBack(); // first: closing sessions needs a server
      } finally {
        run.close();
      }
    }
  }
}
