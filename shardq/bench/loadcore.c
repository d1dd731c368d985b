/*
 * loadcore -- the compiled core of `shardq bench` (shardq/bench/core.py builds and drives it).
 *
 * One process, one epoll loop, non-blocking sockets, pipelined requests: the same load loop as
 * shardq/bench/loadgen.py (roles, refill, quotas, what counts as done), at a fraction of its
 * CPU per operation, so that one load process can keep a fast server busy on a machine with
 * few cores.  The mixed loads' backlog bound is counted as the independent C load generator
 * (bload) counts it: puts issued and not yet deleted, each delete letting one put go.  Every reply is checked against the request it answers (each
 * connection keeps the requests it has in flight, oldest first):
 *
 *   put                    -> INSERTED <digits>
 *   reserve-with-timeout   -> RESERVED <id> <size>\r\n<the body every put sends>\r\n, or
 *                             TIMED_OUT (counted apart; a drainer stops there; an error
 *                             for pingpong)
 *   delete <id>            -> DELETED
 *
 * anything else is an error (the first few are kept verbatim), never a success.
 *
 * Protocol with the parent, on stdin/stdout:
 *   stdin:  one line per connection, "ROLE USE WATCH[,WATCH...]" ("-" for none), then "end"
 *   stdout: "ready" once every connection is connected and set up (use/watch/ignore checked)
 *   stdin:  "go": the clock starts
 *   stdout: one JSON object, loadgen.Result.to_dict's layout (histogram buckets as hist.py's)
 * Errors before "ready" go to stderr with exit status 1.
 *
 *   loadcore --host H --port P --workload W --pipeline N --size B --ttr S --duration SECS
 *            [--quota N] [--backlog N]
 *
 * A run ends when its quota is done, or at --duration once something is measured (a cycle
 * for pingpong, else an answered operation): a run that has no figure yet at the deadline
 * (a short one on a busy machine) waits up to GRACE_NS more for its first answer, so it
 * reports a rate, not 0. With --quota, mixed loads' consumers reserve no more jobs than are
 * left to take: when the last job is deleted no reserve waits, and the run ends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { PUT, RESERVE, DELETE, NOPS };
static const char *OPS[NOPS] = {"put", "reserve", "delete"};
enum { PRODUCER, CONSUMER, DRAINER, PINGPONG };
static const char *ROLES[] = {"producer", "consumer", "drainer", "pingpong"};
enum { W_PUT, W_RESERVE, W_MIXED, W_MULTITUBE, W_PINGPONG };
static const char *WORKLOADS[] = {"put", "reserve", "mixed", "multitube", "pingpong"};

#define MAX_SAMPLES 5
#define GRACE_NS 10000000000ull /* how long past --duration a run waits for its first answer */
#define MAX_CONNS 100000

/* hist.py's buckets: exact below 128 ns, then 64 linear sub-buckets per power of two */
#define SUB_BITS 6
#define LINEAR (1 << (SUB_BITS + 1))
#define MAX_SHIFT 40
#define HSIZE (MAX_SHIFT * (1 << SUB_BITS) + LINEAR)

typedef struct {
	uint64_t total, max, sum;
	uint64_t b[HSIZE];
} hist_t;

static int hidx(uint64_t v)
{
	if (v < LINEAR)
		return (int)v;
	int shift = (64 - __builtin_clzll(v)) - SUB_BITS - 1;
	if (shift > MAX_SHIFT)
		return HSIZE - 1;
	return (shift << SUB_BITS) + (int)(v >> shift);
}

static void hadd(hist_t *h, uint64_t v)
{
	h->b[hidx(v)]++;
	h->total++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

typedef struct {
	uint8_t op;
	uint64_t t; /* when sent (0: not yet) */
} req_t;

typedef struct {
	int fd, role, stopped, want_w, paused;
	char *use, *watch; /* NULL / comma-separated */
	req_t *ring;       /* requests in flight, oldest at head */
	unsigned head, count, cap, unstamped;
	char *out, *in;
	size_t olen, ocap, ilen, icap;
	uint64_t cycle_t0;
} conn_t;

static struct {
	const char *host, *port;
	int workload, pipeline, size, ttr;
	double duration;
	long long quota; /* -1: none */
	long long backlog;
} C = {"127.0.0.1", "11300", W_PUT, 1, 100, 60, 5.0, -1, 5000};

static conn_t *conns;
static int nconns, ep;
static char *put_req, *body;
static size_t put_len;
static long long issued;
static uint64_t counts[NOPS], errors[NOPS], timed_out, conn_errors;
static long long reserving; /* consumers' reserves in flight (bounded mixed loads) */
static hist_t hists[NOPS], cycle;
static char samples[MAX_SAMPLES][128];
static int nsamples;

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "loadcore: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("%s", "out of memory");
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* -- output and requests in flight ------------------------------------------------------- */

static void out_add(conn_t *c, const char *data, size_t n)
{
	if (c->olen + n > c->ocap) {
		c->ocap = (c->olen + n) * 2;
		c->out = xrealloc(c->out, c->ocap);
	}
	memcpy(c->out + c->olen, data, n);
	c->olen += n;
}

static void push(conn_t *c, int op, const char *data, size_t n)
{
	if (c->count == c->cap) { /* grow the ring (a power of two: indexed by a mask), oldest at 0 */
		unsigned cap = c->cap ? c->cap * 2 : 16;
		req_t *r = xrealloc(NULL, cap * sizeof *r);
		for (unsigned i = 0; i < c->count; i++)
			r[i] = c->ring[(c->head + i) & (c->cap - 1)];
		free(c->ring);
		c->ring = r, c->head = 0, c->cap = cap;
	}
	c->ring[(c->head + c->count) & (c->cap - 1)] = (req_t){(uint8_t)op, 0};
	c->count++;
	reserving += c->role == CONSUMER && op == RESERVE;
	c->unstamped++;
	out_add(c, data, n);
}

static req_t *oldest(conn_t *c) { return &c->ring[c->head]; }

static void pop(conn_t *c)
{
	reserving -= c->role == CONSUMER && c->ring[c->head].op == RESERVE;
	c->head = (c->head + 1) & (c->cap - 1);
	c->count--;
}

static void error_reply(int op, const char *line, size_t n)
{
	errors[op]++;
	if (nsamples >= MAX_SAMPLES)
		return;
	char *s = samples[nsamples++];
	int k = snprintf(s, 24, "%s: '", OPS[op]);
	for (size_t i = 0; i < n && i < 80 && k < 120; i++) {
		unsigned char ch = (unsigned char)line[i];
		if (ch >= 32 && ch < 127 && ch != '\'' && ch != '\\')
			s[k++] = (char)ch;
		else
			k += snprintf(s + k, 8, "\\\\x%02x", ch); /* JSON: a backslash, then x and hex */
	}
	snprintf(s + k, 4, "'");
}

/* -- the loop's steps (loadgen.py's of the same names) ------------------------------------ */

/* Mixed loads: a producer with room but no backlog left waits in `paused` until deletes make
 * room (puts issued and not yet deleted or refused, as bload counts them: each delete lets
 * one put go at once, so the puts flow instead of coming in bursts). */
static conn_t **paused;
static int npaused, bounded;
static long long inq;

static void refill(conn_t *c)
{
	if (c->stopped)
		return;
	long long room = C.pipeline - (long long)c->count;
	if (room <= 0)
		return;
	if (c->role == PRODUCER) {
		if (bounded && room > C.backlog - inq) {
			room = C.backlog - inq;
			if (room <= 0) {
				if (!c->paused)
					paused[npaused++] = c;
				c->paused = 1;
				return;
			}
		}
		if (C.quota >= 0 && room > C.quota - issued)
			room = C.quota - issued;
		if (room <= 0)
			return;
		issued += room;
		if (bounded)
			inq += room;
		while (room-- > 0)
			push(c, PUT, put_req, put_len);
	} else if (c->role == CONSUMER || c->role == DRAINER) {
		if (c->role == CONSUMER && C.quota >= 0) {
			/* a bounded run: no more reserves than jobs left to take, so a run whose jobs
			 * are all deleted has no reserve waiting in the server (it ends at once) */
			long long left = C.quota - (long long)counts[RESERVE] - reserving;
			if (room > left)
				room = left;
			if (room <= 0)
				return;
		}
		if (c->role == DRAINER && C.quota >= 0) {
			if (room > C.quota - issued)
				room = C.quota - issued;
			if (room <= 0)
				return;
			issued += room;
		}
		const char *req = c->role == DRAINER ? "reserve-with-timeout 0\r\n" : "reserve-with-timeout 1\r\n";
		while (room-- > 0)
			push(c, RESERVE, req, strlen(req));
	} else if (c->role == PINGPONG && c->count == 0) {
		if (C.quota >= 0) {
			if (issued >= C.quota)
				return;
			issued++;
		}
		push(c, PUT, put_req, put_len);
		c->cycle_t0 = 0;
	}
}

static void send_out(conn_t *c, uint64_t now);

/* Let waiting producers put again, oldest first, while the backlog has room. */
static void resume_paused(uint64_t now)
{
	int k = 0;
	while (k < npaused && inq < C.backlog) {
		conn_t *c = paused[k++];
		c->paused = 0;
		refill(c);
		send_out(c, now);
	}
	if (k) {
		memmove(paused, paused + k, (size_t)(npaused - k) * sizeof *paused);
		npaused -= k;
	}
}

static void drop(conn_t *c)
{
	if (!c->stopped)
		conn_errors++;
	c->stopped = 1;
	while (c->count)
		pop(c); /* its reserves are no longer in flight */
	c->unstamped = 0;
	c->olen = 0;
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

static void send_out(conn_t *c, uint64_t now)
{
	if (!c->olen)
		return;
	for (unsigned i = 0; i < c->unstamped; i++)
		c->ring[(c->head + c->count - 1 - i) & (c->cap - 1)].t = now;
	c->unstamped = 0;
	if (c->role == PINGPONG && !c->cycle_t0)
		c->cycle_t0 = now;
	ssize_t n = send(c->fd, c->out, c->olen, MSG_NOSIGNAL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			drop(c);
			return;
		}
		n = 0;
	}
	c->olen -= (size_t)n;
	if (c->olen)
		memmove(c->out, c->out + n, c->olen);
	int want = c->olen > 0;
	if (want != c->want_w) {
		struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
		c->want_w = want;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
}

static int all_digits(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* The end of the next line in buf[pos, len): its "\r\n" (memchr finds the LF; a bare LF is part
 * of the line, as a search for "\r\n" would have it), or NULL. */
static char *line_end(char *buf, size_t pos, size_t len)
{
	char *start = buf + pos, *end = buf + len, *at = start;
	while (at < end) {
		char *lf = memchr(at, '\n', (size_t)(end - at));
		if (!lf)
			return NULL;
		if (lf > start && lf[-1] == '\r')
			return lf - 1;
		at = lf + 1;
	}
	return NULL;
}

#define IS(line, n, lit) ((n) >= sizeof(lit) - 1 && !memcmp((line), (lit), sizeof(lit) - 1))

/* Check every complete reply in c->in against the request it answers. */
static void on_data(conn_t *c, uint64_t now)
{
	size_t pos = 0;
	char *buf = c->in;
	while (c->count) {
		char *eol = line_end(buf, pos, c->ilen);
		if (!eol)
			break;
		size_t i = (size_t)(eol - buf), n = i - pos;
		const char *line = buf + pos;
		req_t *item = oldest(c);
		if (item->op == PUT) {
			pop(c);
			pos = i + 2;
			if (IS(line, n, "INSERTED ") && all_digits(line + 9, n - 9)) {
				counts[PUT]++;
				hadd(&hists[PUT], now - item->t);
				if (c->role == PINGPONG)
					push(c, RESERVE, "reserve-with-timeout 1\r\n", 24);
			} else {
				error_reply(PUT, line, n);
				inq -= bounded; /* refused: it will never be deleted */
			}
		} else if (item->op == RESERVE && IS(line, n, "RESERVED ")) {
			const char *id = line + 9, *sp = memchr(id, ' ', n - 9);
			size_t idlen = sp ? (size_t)(sp - id) : 0;
			size_t blen = sp ? n - 9 - idlen - 1 : 0;
			if (!sp || !all_digits(id, idlen) || idlen > 20 || !all_digits(sp + 1, blen) || blen > 9) {
				pop(c);
				pos = i + 2;
				error_reply(RESERVE, line, n);
				continue;
			}
			size_t size = (size_t)strtoull(sp + 1, NULL, 10), end = i + 2 + size + 2;
			if (end > c->ilen) {
				if (end > c->icap) { /* a body larger than the buffer: make room */
					c->icap = end * 2;
					c->in = buf = xrealloc(c->in, c->icap);
				}
				break; /* body not complete yet */
			}
			pop(c);
			pos = end;
			if (size != (size_t)C.size || memcmp(buf + i + 2, body, size) ||
			    memcmp(buf + end - 2, "\r\n", 2)) {
				error_reply(RESERVE, line, n);
				continue;
			}
			counts[RESERVE]++;
			hadd(&hists[RESERVE], now - item->t);
			char del[40] = "delete "; /* idlen <= 20: the digits of a u64 */
			memcpy(del + 7, id, idlen);
			memcpy(del + 7 + idlen, "\r\n", 2);
			push(c, DELETE, del, 7 + idlen + 2);
		} else if (item->op == RESERVE) {
			pop(c);
			pos = i + 2;
			if (n == 9 && !memcmp(line, "TIMED_OUT", 9) && c->role != PINGPONG) {
				timed_out++;
				if (c->role == DRAINER)
					c->stopped = 1; /* drained: the pre-filled jobs are all gone */
			} else
				error_reply(RESERVE, line, n);
		} else {
			pop(c);
			pos = i + 2;
			if (n == 7 && !memcmp(line, "DELETED", 7)) {
				counts[DELETE]++;
				inq -= bounded;
				hadd(&hists[DELETE], now - item->t);
				if (c->role == PINGPONG)
					hadd(&cycle, now - c->cycle_t0);
			} else
				error_reply(DELETE, line, n);
		}
	}
	c->ilen -= pos;
	if (c->ilen && pos)
		memmove(c->in, c->in + pos, c->ilen);
}

/* Whether the run has a figure: a cycle for pingpong (its figure is cycles/s), else any
 * operation answered. */
static int measured(void)
{
	if (C.workload == W_PINGPONG)
		return cycle.total > 0;
	return counts[PUT] + counts[RESERVE] + counts[DELETE] > 0;
}

/* When the loop ends: at the deadline, or, while nothing is measured yet (a short run on a
 * busy machine, a server slow to answer its first request), up to GRACE_NS later. */
static uint64_t end_of_run(uint64_t deadline)
{
	return measured() ? deadline : deadline + GRACE_NS;
}

static int done(void)
{
	int all_stopped = 1;
	for (int k = 0; k < nconns; k++) {
		if (!conns[k].stopped) {
			if (conns[k].count)
				return 0;
			all_stopped = 0;
		}
	}
	if (C.workload == W_RESERVE)
		return 1; /* every drainer stopped, or the quota is issued and answered */
	if (C.quota < 0)
		return all_stopped;
	if (C.workload == W_MIXED || C.workload == W_MULTITUBE)
		return issued >= C.quota && (long long)counts[DELETE] >= C.quota;
	return issued >= C.quota;
}

/* -- set-up ------------------------------------------------------------------------------- */

static int connect_to(const struct addrinfo *ai)
{
	uint64_t deadline = now_ns() + 10000000000ull;
	for (;;) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			return fd;
		}
		int e = errno;
		close(fd);
		if (now_ns() > deadline) {
			fprintf(stderr, "loadcore: cannot reach %s:%s: %s\n", C.host, C.port, strerror(e));
			exit(1);
		}
		usleep(50000);
	}
}

/* Send one set-up command and check that the reply line starts with `expect`.  The server sends
 * nothing but this one line until the next command, so each recv takes what has come. */
static void setup_cmd(int fd, const char *verb, const char *tube, const char *expect)
{
	char req[512], line[512];
	int n = snprintf(req, sizeof req, "%s %s\r\n", verb, tube);
	if (n >= (int)sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		die("cannot send '%s'", verb);
	size_t got = 0;
	while (got < 2 || memcmp(line + got - 2, "\r\n", 2)) {
		if (got == sizeof line - 1)
			die("setup '%s': reply too long", verb);
		ssize_t r = recv(fd, line + got, sizeof line - 1 - got, 0);
		if (r <= 0)
			die("server closed the connection during setup (%s)", verb);
		got += (size_t)r;
	}
	line[got - 2] = 0;
	if (strncmp(line, expect, strlen(expect)))
		die("setup answered '%s'", line);
}

static void setup(conn_t *c)
{
	if (c->use && strcmp(c->use, "default"))
		setup_cmd(c->fd, "use", c->use, "USING ");
	if (!c->watch)
		return;
	int has_default = 0;
	char *copy = strdup(c->watch), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		setup_cmd(c->fd, "watch", t, "WATCHING ");
		has_default |= !strcmp(t, "default");
	}
	free(copy);
	if (!has_default)
		setup_cmd(c->fd, "ignore", "default", "WATCHING ");
}

static int role_of(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, ROLES[i]))
			return i;
	die("unknown role %s", s);
	return -1;
}

static void read_plan(void)
{
	char line[65536], role[32], use[4096], watch[60000];
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "end\n"))
			return;
		if (sscanf(line, "%31s %4095s %59999s", role, use, watch) != 3)
			die("bad plan line: %s", line);
		if (nconns == MAX_CONNS)
			die("%s", "too many connections");
		conns = xrealloc(conns, (size_t)(nconns + 1) * sizeof *conns);
		conn_t *c = &conns[nconns++];
		memset(c, 0, sizeof *c);
		c->role = role_of(role);
		c->use = strcmp(use, "-") ? strdup(use) : NULL;
		c->watch = strcmp(watch, "-") ? strdup(watch) : NULL;
	}
	die("%s", "plan not ended by 'end'");
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"host", 1, 0, 'h'},     {"port", 1, 0, 'p'},  {"workload", 1, 0, 'w'},
	    {"pipeline", 1, 0, 'P'}, {"size", 1, 0, 's'},  {"ttr", 1, 0, 'T'},
	    {"duration", 1, 0, 'd'}, {"quota", 1, 0, 'n'}, {"backlog", 1, 0, 'b'},
	    {0, 0, 0, 0}};
	int o, w;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': C.host = optarg; break;
		case 'p': C.port = optarg; break;
		case 'P': C.pipeline = atoi(optarg); break;
		case 's': C.size = atoi(optarg); break;
		case 'T': C.ttr = atoi(optarg); break;
		case 'd': C.duration = atof(optarg); break;
		case 'n': C.quota = atoll(optarg); break;
		case 'b': C.backlog = atoll(optarg); break;
		case 'w':
			for (w = 0; w < 5 && strcmp(optarg, WORKLOADS[w]); w++)
				;
			if (w == 5)
				die("unknown workload %s", optarg);
			C.workload = w;
			break;
		default: die("%s", "bad arguments (see the comment at the top of loadcore.c)");
		}
	}
	if (C.pipeline < 1 || C.size < 0 || C.duration <= 0)
		die("%s", "--pipeline >= 1, --size >= 0 and --duration > 0");
}

/* -- the result ---------------------------------------------------------------------------- */

static void print_hist(const hist_t *h)
{
	printf("{\"buckets\":{");
	const char *sep = "";
	for (int i = 0; i < HSIZE; i++) {
		if (h->b[i]) {
			printf("%s\"%d\":%llu", sep, i, (unsigned long long)h->b[i]);
			sep = ",";
		}
	}
	printf("},\"total\":%llu,\"max\":%llu,\"sum\":%llu}", (unsigned long long)h->total,
	       (unsigned long long)h->max, (unsigned long long)h->sum);
}

static void print_ops(const char *key, const uint64_t *v)
{
	printf("\"%s\":{\"put\":%llu,\"reserve\":%llu,\"delete\":%llu},", key,
	       (unsigned long long)v[PUT], (unsigned long long)v[RESERVE],
	       (unsigned long long)v[DELETE]);
}

static void print_result(double elapsed, double cpu)
{
	printf("{");
	print_ops("counts", counts);
	print_ops("errors", errors);
	printf("\"hists\":{");
	for (int op = 0; op < NOPS; op++) {
		printf("%s\"%s\":", op ? "," : "", OPS[op]);
		print_hist(&hists[op]);
	}
	printf("},\"cycle\":");
	print_hist(&cycle);
	printf(",\"timed_out\":%llu,\"samples\":[", (unsigned long long)timed_out);
	for (int k = 0; k < nsamples; k++)
		printf("%s\"%s\"", k ? "," : "", samples[k]); /* escaped by error_reply */
	printf("],\"conn_errors\":%llu,\"elapsed\":%.6f,\"cpu\":%.6f}\n",
	       (unsigned long long)conn_errors, elapsed, cpu);
}

/* -- main ---------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the bench that started it */
	parse_args(argc, argv);
	body = xrealloc(NULL, (size_t)C.size + 1);
	for (int i = 0; i < C.size; i++)
		body[i] = (char)('a' + i % 26); /* workloads.body_of: what the stub answers too */
	put_req = xrealloc(NULL, (size_t)C.size + 64);
	int hl = snprintf(put_req, 64, "put 0 0 %d %d\r\n", C.ttr, C.size);
	memcpy(put_req + hl, body, (size_t)C.size);
	memcpy(put_req + hl + C.size, "\r\n", 2);
	put_len = (size_t)hl + (size_t)C.size + 2;

	read_plan();
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
	int rc = getaddrinfo(C.host, C.port, &hints, &ai);
	if (rc)
		die("cannot resolve the host: %s", gai_strerror(rc));
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int k = 0; k < nconns; k++) {
		conn_t *c = &conns[k];
		c->fd = connect_to(ai);
		setup(c);
		fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
		c->icap = 1 << 16;
		c->in = xrealloc(NULL, c->icap);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	}
	freeaddrinfo(ai);
	printf("ready\n");
	fflush(stdout);
	char go[16];
	if (!fgets(go, sizeof go, stdin) || strcmp(go, "go\n"))
		die("%s", "expected 'go'");

	bounded = (C.workload == W_MIXED || C.workload == W_MULTITUBE) && C.backlog > 0;
	paused = xrealloc(NULL, (size_t)(nconns + 1) * sizeof *paused);
	uint64_t t0 = now_ns(), now = t0, deadline = t0 + (uint64_t)(C.duration * 1e9);
	double cpu0 = cpu_s();
	for (int k = 0; k < nconns; k++) {
		refill(&conns[k]);
		send_out(&conns[k], now);
	}
	struct epoll_event evs[512];
	unsigned loops = 0;
	uint64_t end;
	while (now < (end = end_of_run(deadline))) {
		int wait_ms = npaused ? 1 : (int)((end - now) / 1000000 + 1);
		if (wait_ms > 50)
			wait_ms = 50;
		int nev = epoll_wait(ep, evs, 512, wait_ms);
		now = now_ns();
		for (int e = 0; e < nev; e++) {
			conn_t *c = evs[e].data.ptr;
			if (c->fd < 0 || (c->stopped && !c->count))
				continue;
			if (evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
				if (c->icap - c->ilen < 4096) {
					c->icap *= 2;
					c->in = xrealloc(c->in, c->icap);
				}
				ssize_t r = recv(c->fd, c->in + c->ilen, c->icap - c->ilen, 0);
				if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
					drop(c);
					continue;
				}
				if (r > 0) {
					c->ilen += (size_t)r;
					on_data(c, now);
				}
			}
			if (!c->stopped) {
				if (!c->want_w)
					refill(c);
				send_out(c, now);
			}
		}
		resume_paused(now);
		if (((++loops & 15) == 0 || nev == 0) && done())
			break;
	}
	double elapsed = (double)(now_ns() - t0) / 1e9, cpu = cpu_s() - cpu0;
	print_result(elapsed, cpu);
	return 0;
}
