// spawnd: the helper that starts the engine's task commands, with posix_spawn.
//
// Why: Node's spawn (libuv's uv_spawn) forks on Linux, copying the page tables
// of the calling process, and waits on that thread until the child has exec'd,
// a cost that grows with the engine's heap. glibc's posix_spawn is
// clone(CLONE_VM|CLONE_VFORK), as make and ninja use it: the cost does not
// grow with the caller. It is optional: built by `npm ci` / `npm install` when
// a C compiler is there (scripts/build-spawnd.mjs, the install script, in a
// checkout and where the package is installed), and when it is not the
// engine spawns each command itself.
//
// Protocol (the engine side is Spawnd in src/execute/runner.ts). Requests
// on stdin, each a one-byte kind and NUL-terminated fields:
//   'e' count, then count "KEY=value"        the environment commands start from
//   'r' id, file, cwd, argc, argc args, envc, envc "KEY=value" added to it
//   'k' id, signal number                      signal the command's process group
//   'w' count, then count paths                have the kernel read these files into the page
//                                               cache (no reply; see read_ahead below)
// Replies on stdout: "ready <VERSION>\n" once, then per command a line
//   "x <id> <code> <signal> <error> <stdout bytes> <stderr bytes> <output bytes> <held>\n"
// followed by those bytes: code is -1 without an exit code, signal and error
// ("ENOENT"…) are '-' when there is none, output (stdout and stderr
// interleaved as they came) is left out (0 bytes) when one of the two is empty,
// and held is 1 when the output was closed while a job the command started
// still held it (held_ms), else 0.
// A command's stdout and stderr are one pipe (its output in the order it was
// written, whichever stream it went to): its stdout bytes are all of it, its
// stderr bytes none.
// While a command runs, after each read of its output, a line
//   "o <id> <bytes>\n"
// followed by the last (at most PROGRESS_TAIL) bytes of what was read: enough
// for the engine's live view to show the command's last line as it comes.
//
// spawnd is a session of its own, and each command a process group of its own
// in it, with stdin from /dev/null, default signal dispositions and an empty
// signal mask. No command has a controlling terminal (as with spawn's
// `detached`), and everything they start that does not leave the session is
// found by it: the engine records spawnd's session, and the next run ends
// what is left in it if this one was killed (src/state/processes.ts).
// spawnd dies with the engine (PR_SET_PDEATHSIG), so a request still queued
// on its stdin is never started by an engine that is gone.
// A program name without a slash is looked up in the PATH of the command's own
// environment, as Node does. stdin closed or stdout gone: the engine is, exit.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VERSION "8"

// How long a command's output is still read once the command has exited, for what
// a job it started in the background writes last; then it is closed and the
// command done, as Go's exec.Cmd.WaitDelay has it. A job that keeps the output
// (a daemon started with `&`, its output not redirected) runs on, unread: it
// does not hold the run until it ends, as it would ninja's. NODEGRAPH_HELD_MS in
// spawnd's own environment sets it (tests).
static long long held_ms = 2000;

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

typedef struct {
  char *data;
  size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const char *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    char *grown = realloc(b->data, cap);
    if (grown == NULL) abort();
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
}

typedef struct {
  long id;
  pid_t pid;  // 0 once reaped
  pid_t group;  // its process group (and session), which outlives it while a job it started runs
  int status;
  long long reaped_at;  // now_ms() when reaped
  int held;  // its output was closed while a job it started held it
  int fd[2];  // stdout, stderr read ends; -1 once at EOF or closed
  buf_t out, err, all;
} command_t;

static command_t **commands;
static size_t ncommands, capcommands;
static char **base_env;
static size_t nbase;

static const char *errname(int e) {
  const char *name = strerrorname_np(e);
  return name ? name : "EUNKNOWN";
}

static void out_all(const char *data, size_t n) {
  while (n > 0) {
    ssize_t w = write(1, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) exit(0);  // the engine is gone
    data += w;
    n -= (size_t)w;
  }
}

#define PROGRESS_TAIL 256

static void progress(long id, const char *data, size_t n) {
  size_t k = n < PROGRESS_TAIL ? n : PROGRESS_TAIL;
  char head[64];
  int len = snprintf(head, sizeof head, "o %ld %zu\n", id, k);
  out_all(head, (size_t)len);
  out_all(data + n - k, k);
}

static void reply(long id, int code, const char *signal, const char *error, command_t *c) {
  size_t nout = c ? c->out.len : 0, nerr = c ? c->err.len : 0;
  size_t nall = (nout > 0 && nerr > 0) ? c->all.len : 0;
  char head[256];
  int n = snprintf(head, sizeof head, "x %ld %d %s %s %zu %zu %zu %d\n", id, code, signal ? signal : "-", error ? error : "-", nout, nerr, nall, c ? c->held : 0);
  out_all(head, (size_t)n);
  if (nout) out_all(c->out.data, nout);
  if (nerr) out_all(c->err.data, nerr);
  if (nall) out_all(c->all.data, nall);
}

static int env_key_is(const char *entry, const char *key, size_t keylen) {
  return strncmp(entry, key, keylen) == 0 && entry[keylen] == '=';
}

// The command's environment: the base, with the added variables over it.
static char **merged_env(char **added, size_t nadded) {
  char **env = malloc((nbase + nadded + 1) * sizeof *env);
  if (env == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < nbase; i++) {
    const char *eq = strchr(base_env[i], '=');
    size_t keylen = eq ? (size_t)(eq - base_env[i]) : strlen(base_env[i]);
    int over = 0;
    for (size_t j = 0; j < nadded && !over; j++) over = env_key_is(added[j], base_env[i], keylen);
    if (!over) env[n++] = base_env[i];
  }
  for (size_t j = 0; j < nadded; j++) env[n++] = added[j];
  env[n] = NULL;
  return env;
}

static int spawn_at(pid_t *pid, const char *path, const char *cwd, int outw, int errw, char **argv, char **envp) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outw, 1);
  posix_spawn_file_actions_adddup2(&fa, errw, 2);
  posix_spawn_file_actions_addchdir_np(&fa, cwd);
  posix_spawnattr_init(&at);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_USEVFORK);
  int rc = posix_spawn(pid, path, &fa, &at, argv, envp);
  if (rc == ENOEXEC) {
    // A program without a #! line: the shell runs it, as execvp (Node's spawn) does.
    size_t argc = 0;
    while (argv[argc] != NULL) argc++;
    char **script = malloc((argc + 2) * sizeof *script);
    if (script == NULL) abort();
    script[0] = "/bin/sh";
    script[1] = (char *)path;
    for (size_t i = 1; i <= argc; i++) script[i + 1] = argv[i];
    rc = posix_spawn(pid, "/bin/sh", &fa, &at, script, envp);
    free(script);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  return rc;
}

// Starts file as execvp would in the command's environment (Node's spawn execs
// with it): a name without a slash is tried in each folder of its first PATH
// (glibc's /bin:/usr/bin without one; relative folders from cwd), going on
// past ENOENT, ENOTDIR and EACCES (reported if nothing else is found),
// stopping at anything else.
static int start(pid_t *pid, const char *file, const char *cwd, int outw, int errw, char **argv, char **envp) {
  if (strchr(file, '/') != NULL) return spawn_at(pid, file, cwd, outw, errw, argv, envp);
  if (*file == '\0') return ENOENT;
  const char *path = "/bin:/usr/bin";
  for (char **e = envp; *e; e++)
    if (env_key_is(*e, "PATH", 4)) {
      path = *e + 5;
      break;
    }
  int seen_eacces = 0;
  size_t flen = strlen(file), clen = strlen(cwd);
  for (const char *p = path;; p++) {
    const char *end = strchrnul(p, ':');
    size_t dlen = (size_t)(end - p);
    char *candidate = malloc(clen + dlen + flen + 3);
    if (candidate == NULL) abort();
    size_t n = 0;
    if (dlen == 0 || p[0] != '/') {
      memcpy(candidate, cwd, clen);
      n = clen;
      candidate[n++] = '/';
    }
    memcpy(candidate + n, p, dlen);
    n += dlen;
    if (dlen > 0) candidate[n++] = '/';
    memcpy(candidate + n, file, flen + 1);
    // A stat first: a folder of PATH without the program costs no clone.
    struct stat st;
    int rc = stat(candidate, &st) == 0 ? spawn_at(pid, candidate, cwd, outw, errw, argv, envp) : errno;
    free(candidate);
    if (rc == 0) return 0;
    if (rc == EACCES) seen_eacces = 1;
    else if (rc != ENOENT && rc != ENOTDIR && rc != ELOOP && rc != ENAMETOOLONG) return rc;
    if (*end == '\0') break;
    p = end;
  }
  return seen_eacces ? EACCES : ENOENT;
}

static void run(long id, const char *file, const char *cwd, char **argv, char **added, size_t nadded) {
  // One pipe for stdout and stderr: the output reads in the order the command wrote it, as on a terminal.
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    reply(id, -1, NULL, errname(errno), NULL);
    return;
  }
  char **envp = merged_env(added, nadded);
  pid_t pid;
  int rc = start(&pid, file, cwd, out[1], out[1], argv, envp);
  free(envp);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    // Node gives the negative errno as the code of a command that never started.
    reply(id, -rc, NULL, errname(rc), NULL);
    return;
  }
  command_t *c = calloc(1, sizeof *c);
  if (c == NULL) abort();
  c->id = id;
  c->pid = pid;
  c->group = pid;
  c->fd[0] = out[0];
  c->fd[1] = -1;
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  if (ncommands == capcommands) {
    capcommands = capcommands ? capcommands * 2 : 16;
    commands = realloc(commands, capcommands * sizeof *commands);
    if (commands == NULL) abort();
  }
  commands[ncommands++] = c;
}

// A command is done once it has been reaped and both pipes are at EOF (as
// Node's 'close'), or held_ms after it was reaped while a background job
// still holds them: they are closed then.
static void finish_if_done(size_t i) {
  command_t *c = commands[i];
  if (c->pid != 0) return;
  if (c->fd[0] >= 0 || c->fd[1] >= 0) {
    if (now_ms() - c->reaped_at < held_ms) return;
    for (int w = 0; w < 2; w++)
      if (c->fd[w] >= 0) {
        close(c->fd[w]);
        c->fd[w] = -1;
      }
    c->held = 1;
  }
  char signame[32];
  const char *signal = NULL;
  int code = -1;
  if (WIFEXITED(c->status)) code = WEXITSTATUS(c->status);
  else if (WIFSIGNALED(c->status)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(c->status));
    snprintf(signame, sizeof signame, "SIG%s", abbrev ? abbrev : "UNKNOWN");
    signal = signame;
  }
  reply(c->id, code, signal, NULL, c);
  free(c->out.data);
  free(c->err.data);
  free(c->all.data);
  free(c);
  commands[i] = commands[--ncommands];
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < ncommands; i++)
      if (commands[i]->pid == pid) {
        commands[i]->pid = 0;
        commands[i]->status = status;
        commands[i]->reaped_at = now_ms();
        finish_if_done(i);
        break;
      }
  }
}

static void drain(size_t i, int which) {
  command_t *c = commands[i];
  char chunk[65536];
  for (;;) {
    ssize_t n = read(c->fd[which], chunk, sizeof chunk);
    if (n > 0) {
      buf_add(which == 0 ? &c->out : &c->err, chunk, (size_t)n);
      buf_add(&c->all, chunk, (size_t)n);
      progress(c->id, chunk, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    close(c->fd[which]);
    c->fd[which] = -1;
    finish_if_done(i);
    return;
  }
}

// Files an observing pass is about to hash (src/plan/observe.ts): each regular file
// of at most READ_AHEAD_MAX bytes is given to the kernel to read ahead, with
// posix_fadvise(WILLNEED), which queues the reads and returns. The engine then reads
// each file on its main thread, one after another; where the kernel had paged them
// out, the disk now has many reads in flight instead of one. Only reads: a path that
// is not a regular file (a fifo, a device) is never opened, and one that became
// another file between the stat and the open is left alone. What fails is skipped.
#define READ_AHEAD_MAX (8 * 1024 * 1024)

static void read_ahead(const char *path) {
  struct stat st, opened;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > READ_AHEAD_MAX) return;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return;
  if (fstat(fd, &opened) == 0 && S_ISREG(opened.st_mode) && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino)
    posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
  close(fd);
}

// Requests: the bytes read so far, and where the next one starts.
static buf_t in;
static size_t in_at;

// The next NUL-terminated field at *at, or NULL if it has not all arrived.
static char *field(size_t *at) {
  char *start = in.data + *at;
  char *nul = memchr(start, '\0', in.len - *at);
  if (nul == NULL) return NULL;
  *at += (size_t)(nul - start) + 1;
  return start;
}

static char **fields(size_t *at, size_t n) {
  char **list = malloc((n + 1) * sizeof *list);
  if (list == NULL) abort();
  for (size_t i = 0; i < n; i++)
    if ((list[i] = field(at)) == NULL) {
      free(list);
      return NULL;
    }
  list[n] = NULL;
  return list;
}

// A count and that many fields after it, or NULL if they have not all arrived.
static char **counted(size_t *at, size_t *n) {
  char *count = field(at);
  if (count == NULL) return NULL;
  *n = strtoul(count, NULL, 10);
  return fields(at, *n);
}

// Handles one whole request at in_at; 0 when it has not all arrived yet.
static int handle(void) {
  if (in_at >= in.len) return 0;
  size_t at = in_at + 1;
  char kind = in.data[in_at];
  if (kind == 'e') {
    size_t n;
    char **list = counted(&at, &n);
    if (list == NULL) return 0;
    // The strings live in `in`, which is compacted: keep copies.
    for (size_t i = 0; i < nbase; i++) free(base_env[i]);
    free(base_env);
    for (size_t i = 0; i < n; i++) list[i] = strdup(list[i]);
    base_env = list;
    nbase = n;
  } else if (kind == 'r') {
    char *id = field(&at), *file = id ? field(&at) : NULL, *cwd = file ? field(&at) : NULL;
    char *argc = cwd ? field(&at) : NULL;
    if (argc == NULL) return 0;
    char **argv = fields(&at, strtoul(argc, NULL, 10));
    if (argv == NULL) return 0;
    char *envc = field(&at);
    size_t nadded = envc ? strtoul(envc, NULL, 10) : 0;
    char **added = envc ? fields(&at, nadded) : NULL;
    if (added == NULL) {
      free(argv);
      return 0;
    }
    run(strtol(id, NULL, 10), file, cwd, argv, added, nadded);
    free(argv);
    free(added);
  } else if (kind == 'k') {
    char *id = field(&at), *sig = id ? field(&at) : NULL;
    if (sig == NULL) return 0;
    long which = strtol(id, NULL, 10);
    int signo = atoi(sig);
    for (size_t i = 0; i < ncommands; i++)
      if (commands[i]->id == which) {
        // The group (see src/execute/group.ts), even once the command itself has
        // exited and a job it started holds its output open; or the command
        // itself if there is no group.
        if (kill(-commands[i]->group, signo) != 0 && commands[i]->pid != 0) kill(commands[i]->pid, signo);
      }
  } else if (kind == 'w') {
    size_t n;
    char **list = counted(&at, &n);
    if (list == NULL) return 0;
    for (size_t i = 0; i < n; i++) read_ahead(list[i]);
    free(list);
  } else {
    fprintf(stderr, "spawnd: unknown request kind %d\n", kind);
    exit(2);
  }
  in_at = at;
  return 1;
}

int main(void) {
  // Dies with the engine; an engine already gone before this line is seen by getppid.
  pid_t engine = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != engine) return 0;
  // The session the engine records (see the top); not a group leader, so setsid cannot fail.
  setsid();
  // Ctrl-C (or a terminal's hangup) reaches the whole foreground group: the
  // engine decides what to stop, and this process has to live to stop its
  // commands and say how they ended.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) {
    perror("spawnd: signalfd");
    return 1;
  }
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  const char *held = getenv("NODEGRAPH_HELD_MS");
  if (held != NULL && *held != '\0') held_ms = atoll(held);
  out_all("ready " VERSION "\n", strlen("ready " VERSION "\n"));

  struct pollfd *fds = NULL;
  size_t capfds = 0;
  for (;;) {
    size_t want = 2 + 2 * ncommands;
    if (want > capfds) {
      capfds = want * 2;
      fds = realloc(fds, capfds * sizeof *fds);
      if (fds == NULL) abort();
    }
    fds[0] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
    for (size_t i = 0; i < ncommands; i++)
      for (int w = 0; w < 2; w++) fds[2 + 2 * i + w] = (struct pollfd){.fd = commands[i]->fd[w], .events = POLLIN};
    size_t polled = ncommands;
    // Until the first reaped command's output is due to be closed (finish_if_done).
    int timeout = -1;
    long long now = now_ms();
    for (size_t i = 0; i < ncommands; i++)
      if (commands[i]->pid == 0) {
        long long left = commands[i]->reaped_at + held_ms - now;
        int wait = left < 0 ? 0 : (int)left;
        if (timeout < 0 || wait < timeout) timeout = wait;
      }
    if (poll(fds, 2 + 2 * polled, timeout) < 0) {
      if (errno == EINTR) continue;
      perror("spawnd: poll");
      return 1;
    }
    // Output first, so that a command reaped below has its last bytes.
    for (size_t i = polled; i-- > 0;)
      for (int w = 0; w < 2; w++)
        if (i < ncommands && fds[2 + 2 * i + w].revents && commands[i]->fd[w] == fds[2 + 2 * i + w].fd) drain(i, w);
    if (fds[1].revents) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) > 0) {}
      reap();
    }
    for (size_t i = ncommands; i-- > 0;) finish_if_done(i);
    if (fds[0].revents) {
      char chunk[65536];
      ssize_t n = read(0, chunk, sizeof chunk);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return 0;
      if (n > 0) {
        buf_add(&in, chunk, (size_t)n);
        while (handle()) {}
        if (in_at > 0) {
          memmove(in.data, in.data + in_at, in.len - in_at);
          in.len -= in_at;
          in_at = 0;
        }
      }
    }
  }
}
