/* A rank for launcher_test: does one small thing chosen by argv[1] and says
 * what it saw, so the test can check what gyrerun gave it.
 *   env                 print the launcher variables (and GYRE_TEST_EXTRA)
 *   args A B ...        print each argument
 *   lines N             N lines on stdout, each written in two pieces, one
 *                       line on stderr, then an unfinished line on stdout
 *   fail-rank K CODE    rank K exits CODE; the others block forever
 *   wait [ignore-term]  print "ready pid=P" and block forever
 *   catch               wait for one SIGINT/SIGTERM/SIGUSR1 and name its sender
 *   affinity            print the CPUs this rank may run on
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank(void) {
  const char* r = getenv("GYRE_RANK");
  return r ? atoi(r) : -1;
}

static void writeAll(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) exit(90);
    s += w;
    n -= (size_t)w;
  }
}

static void blockForever(void) {
  for (;;) pause();
}

static int printEnv(void) {
  static const char* names[] = {"GYRE_RANK",          "GYRE_WORLD_SIZE", "GYRE_LOCAL_RANK",
                                "GYRE_LOCAL_SIZE",    "GYRE_COMM_ID",    "GYRE_SECRET",
                                "GYRE_ROOT_EXTERNAL", "GYRE_TEST_EXTRA"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    const char* v = getenv(names[i]);
    printf("%s=%s\n", names[i], v ? v : "(unset)");
  }
  return 0;
}

static int lines(int n) {
  char buf[64];
  for (int i = 0; i < n; ++i) {
    int len = snprintf(buf, sizeof(buf), "out %d %d\n", rank(), i);
    /* Two writes: the relay must join the halves, not prefix each. */
    writeAll(1, buf, 3);
    writeAll(1, buf + 3, (size_t)len - 3);
  }
  int len = snprintf(buf, sizeof(buf), "err %d\n", rank());
  writeAll(2, buf, (size_t)len);
  len = snprintf(buf, sizeof(buf), "tail %d", rank());
  writeAll(1, buf, (size_t)len);
  return 0;
}

static int catchOne(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigprocmask(SIG_BLOCK, &set, NULL);
  /* Blocked before saying ready: a signal sent after "ready" cannot kill us. */
  printf("ready pgid=%d parent-pgid=%d\n", (int)getpgid(0), (int)getpgid(getppid()));
  siginfo_t info;
  int sig = sigwaitinfo(&set, &info);
  printf("got %s from pid %d\n",
         sig == SIGINT    ? "SIGINT"
         : sig == SIGTERM ? "SIGTERM"
                          : "SIGUSR1",
         (int)info.si_pid);
  return 0;
}

static int affinity(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  printf("cpus=");
  const char* sep = "";
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) {
      printf("%s%d", sep, c);
      sep = ",";
    }
  printf("\n");
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0); /* the test reacts to lines as they come */
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "env")) return printEnv();
  if (!strcmp(mode, "args")) {
    for (int i = 2; i < argc; ++i) printf("arg: %s\n", argv[i]);
    return 0;
  }
  if (!strcmp(mode, "lines") && argc > 2) return lines(atoi(argv[2]));
  if (!strcmp(mode, "fail-rank") && argc > 3) {
    if (rank() == atoi(argv[2])) return atoi(argv[3]);
    blockForever();
  }
  if (!strcmp(mode, "wait")) {
    if (argc > 2 && !strcmp(argv[2], "ignore-term")) signal(SIGTERM, SIG_IGN);
    printf("ready pid=%d\n", (int)getpid());
    blockForever();
  }
  if (!strcmp(mode, "catch")) return catchOne();
  if (!strcmp(mode, "affinity")) return affinity();
  fprintf(stderr, "launcher_probe: unknown mode '%s'\n", mode);
  return 64;
}
