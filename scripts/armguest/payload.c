/*
 * payload.so: a QEMU TCG plugin for scripts/armguest.sh (--payload) that
 * counts who reads and writes packet payloads in the instruction-clocked
 * guest, for the memory cost icount leaves out (docs/arm-projection.md).
 *
 * icount charges 1 ns per instruction wherever its data lives. On the
 * board the bgmac DMAs every frame into DRAM, so the first CPU read of a
 * payload byte is a cache miss; forwarding that never reads the payload
 * pays none. This plugin measures which software reads payloads: the
 * kernel's checksum and copy routines (csum_partial*, memcpy,
 * arm_copy_*_user ...), their instructions and the bytes they load and
 * store (a call that moves fewer than 256 bytes, a header's, apart),
 * split by the context that called them. A context is set on
 * entry to a marker function and holds until the next one:
 *
 *   brx   the board's receive side: napi_gro_receive (GRO's checksum
 *         validation), nf_hook_slow (conntrack's), tpacket_rcv
 *         (AF_PACKET's copy into the ring), xsk_generic_rcv and
 *         xdp_do_redirect (AF_XDP's, generic or native XDP)
 *   btx   the board's transmit side: skb_segment (software GSO),
 *         packet_sendmsg, xsk_sendmsg
 *   host  the iperf3 hosts: tcp_v4_rcv, tcp_sendmsg, tcp_recvmsg
 *
 * The addresses come from the guest's /proc/kallsyms (the ARM kernel
 * has no KASLR; armguest.sh checks every boot prints the same ones),
 * in a file of "start end kind name" lines, syms=PATH.
 *
 * Windows: the guest's /sbin/mark executes one marker instruction,
 * "mov r11, r11" (0xe1a0b00b, which no compiler emits); at each one the
 * plugin logs its cumulative counters ("PL MARK n ..."), and the host
 * takes differences between a case's two marks. Output goes through
 * qemu's log (-d plugin -D FILE).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MARK_INSN 0xe1a0b00bu

enum ctx { CTX_NONE, CTX_BRX, CTX_BTX, CTX_HOST, NCTX };
enum kind { K_CSUM, K_COPY, NKIND };
static const char *ctx_name[NCTX] = { "none", "brx", "btx", "host" };
static const char *kind_name[NKIND] = { "csum", "copy" };

/*
 * A call that moves fewer than BIG bytes is a header's (the VLAN tag's
 * memmove, the cached hard header's memcpy): its loads and stores are
 * counted apart from a payload's.
 */
#define BIG 256

struct counts {
	uint64_t insns, ld, st, ld_small, st_small;
};

/* One vCPU (armguest.sh runs -smp 1): plain globals. */
static struct counts cnt[NCTX][NKIND];
static enum ctx cur = CTX_NONE;
static uint64_t total_insns;
static uint64_t marks;

struct range {
	uint64_t start, end;
	int is_marker;	/* 1: marker (ctx), 0: routine (kind) */
	int what;	/* enum ctx or enum kind */
};
static struct range ranges[64];
static int nranges;

/* The routine call in progress: its bytes are filed when it ends. */
static int call_kind = -1;
static enum ctx call_ctx;
static uint64_t call_ld, call_st;

static void file_call(void)
{
	struct counts *c;

	if (call_kind >= 0) {
		c = &cnt[call_ctx][call_kind];
		if (call_ld + call_st >= BIG) {
			c->ld += call_ld;
			c->st += call_st;
		} else {
			c->ld_small += call_ld;
			c->st_small += call_st;
		}
	}
	call_kind = -1;
	call_ld = call_st = 0;
}

static void on_marker(unsigned int vcpu, void *udata)
{
	cur = (enum ctx)(uintptr_t)udata;
}

/* on_routine_entry runs at a routine's first instruction: a new call. */
static void on_routine_entry(unsigned int vcpu, void *udata)
{
	file_call();
	call_kind = (int)(uintptr_t)udata;
	call_ctx = cur;
}

static void on_routine_insn(unsigned int vcpu, void *udata)
{
	cnt[cur][(uintptr_t)udata].insns++;
}

static void on_routine_mem(unsigned int vcpu, qemu_plugin_meminfo_t info,
			   uint64_t vaddr, void *udata)
{
	uint64_t n = 1u << qemu_plugin_mem_size_shift(info);

	if (call_kind < 0) {	/* a call that began before the window */
		call_kind = (int)(uintptr_t)udata;
		call_ctx = cur;
	}
	if (qemu_plugin_mem_is_store(info))
		call_st += n;
	else
		call_ld += n;
}

/*
 * prof=1: a profile by translation block. Each block translated gets a
 * counter bumped inline on every execution; at each mark the blocks
 * that ran at least PROF_MIN instructions since the last mark are logged
 * ("PL PROF m vaddr insns"), and the host names them from the guest's
 * kallsyms (kernel addresses; user space is one bucket). Exact, not
 * sampled: icount's clock is these instructions.
 */
#define PROF_MIN 200000
struct tbc {
	uint64_t vaddr, count, last;
	uint32_t n;
	struct tbc *next;
};
static int prof;
static struct tbc *tbcs;

static void dump_prof(void)
{
	struct tbc *t;
	uint64_t user = 0, small = 0, d;

	for (t = tbcs; t; t = t->next) {
		d = (t->count - t->last) * t->n;
		t->last = t->count;
		if (t->vaddr < 0xbf000000u) {	/* modules from 0xbf000000 */
			user += d;
			if (d >= PROF_MIN) {
				char line[96];

				snprintf(line, sizeof(line), "PL PROF %" PRIu64 " u%08" PRIx64 " %" PRIu64 "\n",
					 marks, t->vaddr, d);
				qemu_plugin_outs(line);
			}
		} else if (d < PROF_MIN)
			small += d;
		else {
			char line[96];

			snprintf(line, sizeof(line), "PL PROF %" PRIu64 " %08" PRIx64 " %" PRIu64 "\n",
				 marks, t->vaddr, d);
			qemu_plugin_outs(line);
		}
	}
	{
		char line[128];

		snprintf(line, sizeof(line), "PL PROF %" PRIu64 " user %" PRIu64 "\nPL PROF %" PRIu64 " small %" PRIu64 "\n",
			 marks, user, marks, small);
		qemu_plugin_outs(line);
	}
}

static void on_mark(unsigned int vcpu, void *udata)
{
	char line[1024];
	int n, c, k;

	file_call();
	if (prof)
		dump_prof();
	n = snprintf(line, sizeof(line), "PL MARK %" PRIu64 " insns=%" PRIu64,
		     marks++, total_insns);
	for (c = 0; c < NCTX; c++)
		for (k = 0; k < NKIND; k++)
			n += snprintf(line + n, sizeof(line) - n,
				      " %s.%s=%" PRIu64 "/%" PRIu64 "/%" PRIu64
				      "/%" PRIu64 "/%" PRIu64,
				      ctx_name[c], kind_name[k], cnt[c][k].insns,
				      cnt[c][k].ld, cnt[c][k].st,
				      cnt[c][k].ld_small, cnt[c][k].st_small);
	snprintf(line + n, sizeof(line) - n, "\n");
	qemu_plugin_outs(line);
}

static const struct range *find(uint64_t pc)
{
	int i;

	for (i = 0; i < nranges; i++)
		if (ranges[i].is_marker ? pc == ranges[i].start
					: pc >= ranges[i].start && pc < ranges[i].end)
			return &ranges[i];
	return NULL;
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t i, n = qemu_plugin_tb_n_insns(tb);

	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &total_insns, n);
	if (prof) {
		struct tbc *t = calloc(1, sizeof(*t));

		if (t) {
			t->vaddr = qemu_plugin_tb_vaddr(tb);
			t->n = n;
			t->next = tbcs;
			tbcs = t;
			qemu_plugin_register_vcpu_tb_exec_inline(
				tb, QEMU_PLUGIN_INLINE_ADD_U64, &t->count, 1);
		}
	}
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		const struct range *r;
		uint32_t op;

		if (qemu_plugin_insn_size(insn) == 4) {
			memcpy(&op, qemu_plugin_insn_data(insn), 4);
			if (op == MARK_INSN) {
				qemu_plugin_register_vcpu_insn_exec_cb(
					insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
				continue;
			}
		}
		if (pc < 0xc0000000u || !(r = find(pc)))
			continue;	/* user space, or no routine or marker */
		if (r->is_marker) {
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)r->what);
		} else {
			if (pc == r->start)
				qemu_plugin_register_vcpu_insn_exec_cb(
					insn, on_routine_entry,
					QEMU_PLUGIN_CB_NO_REGS,
					(void *)(uintptr_t)r->what);
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, on_routine_insn, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)r->what);
			qemu_plugin_register_vcpu_mem_cb(
				insn, on_routine_mem, QEMU_PLUGIN_CB_NO_REGS,
				QEMU_PLUGIN_MEM_RW, (void *)(uintptr_t)r->what);
		}
	}
}

static int load_syms(const char *path)
{
	FILE *f = fopen(path, "r");
	char kind[16], name[128];
	uint64_t start, end;

	if (!f) {
		fprintf(stderr, "payload: cannot open %s\n", path);
		return -1;
	}
	while (fscanf(f, "%" SCNx64 " %" SCNx64 " %15s %127s", &start, &end,
		      kind, name) == 4) {
		struct range *r;
		int c;

		if (nranges == (int)(sizeof(ranges) / sizeof(ranges[0])))
			break;
		r = &ranges[nranges];
		r->start = start;
		r->end = end;
		if (strcmp(kind, "csum") == 0 || strcmp(kind, "copy") == 0) {
			r->is_marker = 0;
			r->what = strcmp(kind, "csum") == 0 ? K_CSUM : K_COPY;
		} else {
			for (c = 1; c < NCTX && strcmp(kind, ctx_name[c]); c++)
				;
			if (c == NCTX) {
				fprintf(stderr, "payload: %s: unknown kind %s\n", path, kind);
				fclose(f);
				return -1;
			}
			r->is_marker = 1;
			r->what = c;
		}
		nranges++;
	}
	fclose(f);
	if (nranges == 0) {
		fprintf(stderr, "payload: no symbols in %s\n", path);
		return -1;
	}
	return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info, int argc,
					   char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (strncmp(argv[i], "syms=", 5) == 0) {
			if (load_syms(argv[i] + 5))
				return -1;
		} else if (strcmp(argv[i], "prof=1") == 0) {
			prof = 1;
		} else {
			fprintf(stderr, "payload: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	if (nranges == 0) {
		fprintf(stderr, "payload: want syms=PATH\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	return 0;
}
