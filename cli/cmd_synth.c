/* cmd_synth: `batchgen synth` writes a synthetic Llama (or qwen2) GGUF model (random
 * weights of a named or custom shape) that batchgen and llama.cpp both load. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/synth.h"

static void synth_usage(FILE *f)
{
	fprintf(f,
		"usage: batchgen synth [--shape NAME] [--layers N] [--embd N] [--heads N]\n"
		"                      [--kv-heads N] [--ffn N] [--vocab N] [--ctx N]\n"
		"                      [--rope-base F] [--eps F] [--dtype f32|f16|bf16|q8_0]\n"
		"                      [--seed S] [--tie|--no-tie] [--vocab-from FILE.gguf]\n"
		"                      [--name NAME] [--arch ARCH] [--head-dim N]\n"
		"                      [--sliding-window N] [--swa-all] [--experts N]\n"
		"                      [--experts-used K] [--ffn-exp N] -o OUT.gguf\n"
		"       batchgen synth --list-shapes\n"
		"\n"
		"Writes a Llama GGUF model with seeded random weights (N(0, 1/fan_in), norms 1).\n"
		"--shape starts from a named shape (default tiny); the size flags override it.\n"
		"The shape also names the architecture: the qwen2* shapes write qwen2 models\n"
		"(f32 Q/K/V biases, N(0, 0.25); NeoX RoPE in batchgen and llama.cpp alike),\n"
		"the qwen3*, gemma2*, gemma3*, gemma4*, phi3*, olmo2* shapes those architectures\n"
		"(llama3-tiny, llama-linear-tiny, llama-yarn-tiny: Llama 3.1 rope_freqs, linear,\n"
		"YaRN; llama-3.1-*: rope_freqs factor 8, llama-3.2-*: factor 32).\n"
		"--arch sets the architecture of any shape (%s;\n"
		"the recurrent and hybrid ones take their own sizes from a shape of theirs:\n"
		"--list-shapes names every shape's architecture);\n"
		"--head-dim the attention.key_length;\n"
		"--sliding-window the attention.sliding_window key (gemma2, gemma3, gemma4,\n"
		"gpt-oss, olmo2, cohere2 and step35 apply it, exaone4 in a 64-layer file;\n"
		"llama4 keeps its chunk of 8192; phi3 only records it);\n"
		"--swa-all writes sliding_window_pattern 0 (every layer windowed).\n"
		"The qwen3moe* shapes, qwen3-30b-a3b and the mixtral* shapes write mixtures of\n"
		"experts: --experts the experts per layer, --experts-used those a token uses,\n"
		"--ffn-exp their width (qwen3moe; a llama expert is --ffn wide); gpt-oss-tiny\n"
		"and gpt-oss-20b write gpt-oss models (experts with biases, attention sinks);\n"
		"granite-tiny a granite model (embedding, attention, residual, logit scales;\n"
		"granitemoe-tiny the same with experts),\n"
		"mistral3-tiny a mistral3 model (attention temperature, YaRN), smollm3-tiny a\n"
		"smollm3 model (every 4th layer without RoPE), seed_oss-tiny and seed-oss-36b\n"
		"seed_oss models (Q/K/V biases, the FFN norm named post_attention_norm),\n"
		"apertus-tiny, apertus-8b and apertus-70b apertus models (Q/K norms, a non-gated\n"
		"xIELU FFN with its xielu.* keys, rope_freqs), gemma4-tiny and gemma4-31b gemma4\n"
		"models (windowed and global layers of different head sizes, V = K on the\n"
		"global layers, layer output scales; gemma4-e-tiny with E2B/E4B's per-layer\n"
		"embeddings and shared-KV layers), glm4-tiny, glm4-9b and glm4-32b glm4 models\n"
		"(RoPE on half of each head, Q/K/V biases, post-norms, gate|up ffn_up;\n"
		"glm4-tiny with a NextN layer after its 2), glm4moe-tiny, glm4.5-air and glm4.5\n"
		"glm4moe models (leading dense layers, sigmoid-routed experts with a selection\n"
		"bias and a shared expert), command-r-tiny, command-r-plus-tiny (64 layers:\n"
		"per-head Q/K norms), command-r-35b and command-r-plus-104b command-r models,\n"
		"cohere2-tiny, command-r7b and command-a-111b cohere2 models (LayerNorms, parallel\n"
		"attention and FFN, logit_scale, the output tied: --no-tie is refused; cohere2: 3\n"
		"windowed layers with RoPE, then 1 global without), minimax-m2-tiny and minimax-m2\n"
		"minimax-m2 models (whole-row Q/K norms, RoPE on half of each head, sigmoid-routed\n"
		"experts with a selection bias, no shared expert).\n"
		"--vocab-from copies the tokenizer.* keys of another GGUF file (the vocabulary\n"
		"size is then that file's); otherwise a SentencePiece-style vocabulary is made.\n"
		"The same flags and seed always give the same file.\n",
		arch_names());
}

static bool parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || s[0] == '-' || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool parse_f32(const char *s, float *out)
{
	char *end;
	float v = strtof(s, &end);
	if (!*s || *end)
		return false;
	*out = v;
	return true;
}

static bool parse_dtype(const char *s, enum gguf_dtype *out)
{
	static const struct {
		const char *name;
		enum gguf_dtype t;
	} map[] = {{"f32", GGUF_DTYPE_F32},
		   {"f16", GGUF_DTYPE_F16},
		   {"bf16", GGUF_DTYPE_BF16},
		   {"q8_0", GGUF_DTYPE_Q8_0}};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(s, map[i].name) == 0) {
			*out = map[i].t;
			return true;
		}
	return false;
}

int cmd_synth(int argc, char **argv)
{
	enum {
		O_SHAPE = 256,
		O_LAYERS,
		O_EMBD,
		O_HEADS,
		O_KV,
		O_FFN,
		O_VOCAB,
		O_CTX,
		O_ROPE,
		O_EPS,
		O_DTYPE,
		O_SEED,
		O_TIE,
		O_NOTIE,
		O_VOCAB_FROM,
		O_NAME,
		O_LIST,
		O_ARCH,
		O_HEAD_DIM,
		O_SWA,
		O_SWA_ALL,
		O_EXPERTS,
		O_EXPERTS_USED,
		O_FFN_EXP,
	};
	static const struct option opts[] = {
	    {"shape", required_argument, NULL, O_SHAPE},
	    {"layers", required_argument, NULL, O_LAYERS},
	    {"embd", required_argument, NULL, O_EMBD},
	    {"heads", required_argument, NULL, O_HEADS},
	    {"kv-heads", required_argument, NULL, O_KV},
	    {"ffn", required_argument, NULL, O_FFN},
	    {"vocab", required_argument, NULL, O_VOCAB},
	    {"ctx", required_argument, NULL, O_CTX},
	    {"rope-base", required_argument, NULL, O_ROPE},
	    {"eps", required_argument, NULL, O_EPS},
	    {"dtype", required_argument, NULL, O_DTYPE},
	    {"seed", required_argument, NULL, O_SEED},
	    {"tie", no_argument, NULL, O_TIE},
	    {"no-tie", no_argument, NULL, O_NOTIE},
	    {"vocab-from", required_argument, NULL, O_VOCAB_FROM},
	    {"name", required_argument, NULL, O_NAME},
	    {"output", required_argument, NULL, 'o'},
	    {"list-shapes", no_argument, NULL, O_LIST},
	    {"arch", required_argument, NULL, O_ARCH},
	    {"head-dim", required_argument, NULL, O_HEAD_DIM},
	    {"sliding-window", required_argument, NULL, O_SWA},
	    {"swa-all", no_argument, NULL, O_SWA_ALL},
	    {"experts", required_argument, NULL, O_EXPERTS},
	    {"experts-used", required_argument, NULL, O_EXPERTS_USED},
	    {"ffn-exp", required_argument, NULL, O_FFN_EXP},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	/* first pass: the shape, so that the size flags override it in any order */
	const struct synth_shape *base = synth_find_shape("tiny");
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
			v = argv[i + 1];
		else if (strncmp(argv[i], "--shape=", 8) == 0)
			v = argv[i] + 8;
		if (v && !(base = synth_find_shape(v))) {
			fprintf(stderr, "batchgen synth: unknown shape '%s' (see --list-shapes)\n",
				v);
			return CLI_EXIT_USAGE;
		}
	}
	struct synth_opts o;
	synth_opts_init(&o, base);
	const char *out = NULL, *vocab_from = NULL;
	bool expert_flag = false; /* --experts-used or --ffn-exp given */
	int c, li = -1;
	optind = 1;
	opterr = 0;
	while ((li = -1, c = getopt_long(argc, argv, ":o:h", opts, &li)) != -1) {
		bool ok = true;
		switch (c) {
		case O_SHAPE: break;
		case O_LAYERS: ok = parse_u32(optarg, &o.shape.n_layer); break;
		case O_EMBD: ok = parse_u32(optarg, &o.shape.n_embd); break;
		case O_HEADS: ok = parse_u32(optarg, &o.shape.n_head); break;
		case O_KV: ok = parse_u32(optarg, &o.shape.n_head_kv); break;
		case O_FFN: ok = parse_u32(optarg, &o.shape.n_ff); break;
		case O_VOCAB: ok = parse_u32(optarg, &o.shape.n_vocab) && o.shape.n_vocab; break;
		case O_CTX: ok = parse_u32(optarg, &o.shape.n_ctx); break;
		case O_ROPE: ok = parse_f32(optarg, &o.shape.rope_base); break;
		case O_EPS: ok = parse_f32(optarg, &o.shape.rms_eps); break;
		case O_DTYPE: ok = parse_dtype(optarg, &o.dtype); break;
		case O_SEED: {
			char *end;
			o.seed = strtoull(optarg, &end, 0);
			ok = *optarg && !*end && optarg[0] != '-';
			break;
		}
		case O_TIE: o.tie_output = true; break;
		case O_NOTIE: o.tie_output = false; break;
		case O_VOCAB_FROM: vocab_from = optarg; break;
		case O_NAME: o.name = optarg; break;
		case O_ARCH: o.shape.arch = optarg; break; /* synth_check validates it */
		case O_HEAD_DIM: ok = parse_u32(optarg, &o.shape.head_dim); break;
		case O_SWA: ok = parse_u32(optarg, &o.shape.n_swa); break;
		case O_SWA_ALL: o.shape.swa_all = true; break;
		case O_EXPERTS: ok = parse_u32(optarg, &o.shape.n_expert); break;
		case O_EXPERTS_USED:
			ok = parse_u32(optarg, &o.shape.n_expert_used);
			expert_flag = true;
			break;
		case O_FFN_EXP:
			ok = parse_u32(optarg, &o.shape.n_ff_exp);
			expert_flag = true;
			break;
		case 'o': out = optarg; break;
		case O_LIST:
			for (size_t i = 0; i < synth_n_shapes(); i++) {
				const struct synth_shape *s = synth_shape_at(i);
				struct synth_opts so;
				synth_opts_init(&so, s);
				struct synth_shape sv = *s;
				sv.n_vocab = synth_n_vocab(&so);
				char moe[64] = "";
				if (s->n_expert)
					snprintf(moe, sizeof moe, ", %u of %u experts %u wide",
						 s->n_expert_used, s->n_expert, synth_n_ff_exp(s));
				printf("%-15s %s, layers %u, embd %u, heads %u, kv heads %u, "
				       "ffn %u%s, vocab %u, ctx %u, rope base %g%s, %.1f M params\n",
				       s->name, synth_arch(s), s->n_layer, s->n_embd, s->n_head,
				       s->n_head_kv, s->n_ff, moe, sv.n_vocab, s->n_ctx,
				       (double)s->rope_base, s->tie_output ? ", tied output" : "",
				       (double)synth_n_params(&sv, s->tie_output) / 1e6);
			}
			return CLI_EXIT_OK;
		case 'h': synth_usage(stdout); return CLI_EXIT_OK;
		case ':':
			fprintf(stderr, "batchgen synth: %s needs a value\n", argv[optind - 1]);
			return CLI_EXIT_USAGE;
		default:
			fprintf(stderr, "batchgen synth: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return CLI_EXIT_USAGE;
		}
		if (!ok) {
			fprintf(stderr, "batchgen synth: bad value '%s' for --%s\n", optarg,
				li >= 0 ? opts[li].name : "?");
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "batchgen synth: unexpected argument '%s'\n", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (!out) {
		fprintf(stderr, "batchgen synth: -o OUT.gguf is required (see --help)\n");
		return CLI_EXIT_USAGE;
	}
	if (expert_flag && !o.shape.n_expert) {
		/* a dense shape (or --experts 0) would ignore them: say so rather than write a
		 * model without the experts asked for */
		fprintf(stderr, "batchgen synth: --experts-used and --ffn-exp need experts "
				"(--experts N, or a mixture-of-experts --shape)\n");
		return CLI_EXIT_USAGE;
	}
	struct bg_err err = {0};
	struct gguf_ctx *vg = NULL;
	if (vocab_from) {
		if (gguf_open(vocab_from, &vg, &err) != BG_OK) {
			fprintf(stderr, "batchgen: %s\n", err.msg);
			return CLI_EXIT_MODEL;
		}
		o.vocab_from = vg;
	}
	if (synth_check(&o, &err) != BG_OK) {
		fprintf(stderr, "batchgen synth: %s\n", err.msg);
		gguf_close(vg);
		return CLI_EXIT_USAGE;
	}
	enum bg_status st = synth_write(&o, out, &err);
	if (st != BG_OK) {
		fprintf(stderr, "batchgen: %s\n", err.msg);
		gguf_close(vg);
		return CLI_EXIT_MODEL;
	}
	struct synth_shape s = o.shape;
	s.n_vocab = synth_n_vocab(&o);
	char moe[64] = ""; /* as --list-shapes says it: a mixtral file is arch llama */
	if (s.n_expert)
		snprintf(moe, sizeof moe, ", %u of %u experts %u wide", s.n_expert_used, s.n_expert,
			 synth_n_ff_exp(&s));
	fprintf(stderr,
		"batchgen: wrote %s: %s, %u layers, embd %u, heads %u/%u, ffn %u%s, vocab %u, %s, "
		"seed %llu, %.3f M params\n",
		out, synth_arch(&s), s.n_layer, s.n_embd, s.n_head, s.n_head_kv, s.n_ff, moe,
		s.n_vocab, gguf_dtype_name(o.dtype), (unsigned long long)o.seed,
		(double)synth_n_params(&s, o.tie_output) / 1e6);
	gguf_close(vg);
	return CLI_EXIT_OK;
}
