package dev.dlock;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real, disposable PostgreSQL for the guard's test, started as tests/support/postgres_server.cc
 * does: initdb into a temporary directory, a free loopback port, fsync off, run as "nobody" when
 * the tests run as root; stopped and removed on close.
 */
final class Postgres implements AutoCloseable {
  private final Path root;
  private final Process postmaster;
  final int port;

  Postgres() throws IOException, InterruptedException {
    String bin = findBinDir();
    root = Files.createTempDirectory("dlock-java-pg");
    boolean asRoot = "root".equals(System.getProperty("user.name"));
    if (asRoot) {
      run(List.of("chown", "nobody:", root.toString()), false);
    }
    Path data = root.resolve("data");
    run(List.of(bin + "/initdb", "-D", data.toString(), "-U", "dlock", "--auth=trust", "-E", "UTF8",
        "--no-sync", "--no-instructions"), asRoot);
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    List<String> argv = new ArrayList<>(List.of(bin + "/postgres", "-D", data.toString(), "-p",
        Integer.toString(port), "-c", "listen_addresses=127.0.0.1", "-c",
        "unix_socket_directories=", "-c", "fsync=off", "-c", "shared_buffers=32MB"));
    postmaster = start(argv, asRoot).redirectOutput(root.resolve("postgres.log").toFile())
        .redirectErrorStream(true).start();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try (Connection probe = connect()) {
        if (probe.isValid(2)) {
          return;
        }
      } catch (SQLException notYet) {
        if (!postmaster.isAlive() || System.nanoTime() - end > 0) {
          throw new IOException("postgres did not start: "
              + Files.readString(root.resolve("postgres.log")), notYet);
        }
        Thread.sleep(50);
      }
    }
  }

  private static String findBinDir() throws IOException {
    String dir = System.getenv("DLOCK_PG_BIN_DIR");
    if (dir != null && !dir.isEmpty()) {
      return dir;
    }
    for (String version : new String[] {"15", "16", "17", "14", "13"}) {
      if (Files.exists(Path.of("/usr/lib/postgresql/" + version + "/bin/postgres"))) {
        return "/usr/lib/postgresql/" + version + "/bin";
      }
    }
    throw new IOException("PostgreSQL server binaries not found (install postgresql-15)");
  }

  private ProcessBuilder start(List<String> argv, boolean asNobody) {
    List<String> command = new ArrayList<>();
    if (asNobody) {
      command.addAll(List.of("runuser", "-u", "nobody", "--"));
    }
    command.addAll(argv);
    return new ProcessBuilder(command).directory(root.toFile());
  }

  private void run(List<String> argv, boolean asNobody) throws IOException, InterruptedException {
    Process process = start(argv, asNobody).redirectErrorStream(true).start();
    String output = new String(process.getInputStream().readAllBytes());
    if (process.waitFor() != 0) {
      throw new IOException(argv.get(0) + " failed: " + output);
    }
  }

  Connection connect() throws SQLException {
    return DriverManager.getConnection(
        "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=dlock&connectTimeout=2");
  }

  @Override
  public void close() throws IOException {
    postmaster.destroy(); // SIGTERM: smart shutdown
    try {
      if (!postmaster.waitFor(30, TimeUnit.SECONDS)) {
        postmaster.destroyForcibly();
      }
    } catch (InterruptedException interrupted) {
      postmaster.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(root)) {
      files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    }
  }
}
