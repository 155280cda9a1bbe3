// llama.cpp as the end-to-end oracle: its tokenizer, detokenizer and logits, through libllama
// (built by llama-vulkan.sh from the same sdist as the peer; compiled by `llama-vulkan.sh build`).
//
//   llama-oracle tokenize MODEL < TEXTS       texts separated by NUL bytes; one line of ids each
//                                             (add_special and parse_special, as llama-cli does)
//   llama-oracle detokenize MODEL < IDS       a line of space-separated ids each; prints the text as
//                                             hex bytes, one line each (special tokens not rendered)
//   llama-oracle logits MODEL cpu|vulkan OUT.npy < IDS
//                                             one line of ids, evaluated as one batch (f32 KV cache,
//                                             no flash attention, every position's logits): OUT.npy
//                                             float32 [positions, n_vocab]
//
// `cpu` keeps every layer and operation on the CPU backend (no device, no op offload); `vulkan`
// offloads every layer to the first Vulkan device (GGML_VK_VISIBLE_DEVICES, set by the script).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void die(const char * msg) {
    fprintf(stderr, "llama-oracle: %s\n", msg);
    exit(1);
}

static char * read_all(size_t * len) {
    size_t cap = 1 << 16, n = 0;
    char * buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    *len = n;
    return buf;
}

static int parse_ids(const char * line, llama_token * out, int max) {
    int n = 0;
    const char * p = line;
    while (*p && *p != '\n') {
        char * end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (n == max) die("too many ids");
        out[n++] = (llama_token) v;
        p = end;
    }
    return n;
}

static bool no_progress(float p, void * data) {
    (void) p;
    (void) data;
    return true;
}

static struct llama_model * load(const char * path, int gpu) {
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = no_progress;
    static ggml_backend_dev_t none[1] = {NULL};
    if (gpu) {
        mp.n_gpu_layers = 999;
    } else {
        mp.n_gpu_layers = 0;
        mp.devices = none;
    }
    struct llama_model * m = llama_model_load_from_file(path, mp);
    if (!m) die("cannot load the model");
    return m;
}

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    if (argc < 3) die("usage: llama-oracle tokenize|detokenize|logits MODEL ...");
    llama_log_set(quiet, NULL);
    llama_backend_init();
    const char * cmd = argv[1];
    size_t len;
    char * in = read_all(&len);
    enum { MAX = 1 << 20 };
    llama_token * ids = malloc(sizeof(llama_token) * MAX);
    if (!strcmp(cmd, "tokenize")) {
        struct llama_model * m = load(argv[2], 0);
        const struct llama_vocab * v = llama_model_get_vocab(m);
        size_t start = 0;
        while (start < len) {
            size_t end = start;
            while (end < len && in[end] != 0) end++;
            int n = llama_tokenize(v, in + start, (int32_t) (end - start), ids, MAX, true, true);
            if (n < 0) die("tokenize failed");
            for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            printf("\n");
            start = end + 1;
        }
    } else if (!strcmp(cmd, "detokenize")) {
        struct llama_model * m = load(argv[2], 0);
        const struct llama_vocab * v = llama_model_get_vocab(m);
        char * text = malloc(1 << 20);
        char * line = in;
        while (line < in + len) {
            char * nl = memchr(line, '\n', (size_t) (in + len - line));
            if (!nl) nl = in + len;
            *nl = 0;
            int n = parse_ids(line, ids, MAX);
            int t = llama_detokenize(v, ids, n, text, 1 << 20, false, false);
            if (t < 0) die("detokenize failed");
            for (int i = 0; i < t; i++) printf("%02x", (unsigned char) text[i]);
            printf("\n");
            line = nl + 1;
        }
    } else if (!strcmp(cmd, "logits")) {
        if (argc != 5) die("usage: llama-oracle logits MODEL cpu|vulkan OUT.npy < IDS");
        int gpu = !strcmp(argv[3], "vulkan");
        if (!gpu && strcmp(argv[3], "cpu")) die("the backend is cpu or vulkan");
        struct llama_model * m = load(argv[2], gpu);
        const struct llama_vocab * v = llama_model_get_vocab(m);
        int n = parse_ids(in, ids, MAX);
        if (n == 0) die("no ids");
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) n;
        cp.n_batch = (uint32_t) n;
        cp.n_ubatch = (uint32_t) n;
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.op_offload = gpu;
        cp.no_perf = true;
        struct llama_context * ctx = llama_init_from_model(m, cp);
        if (!ctx) die("cannot create a context");
        struct llama_batch b = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; i++) {
            b.token[i] = ids[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = n;
        if (llama_decode(ctx, b) != 0) die("decode failed");
        int nv = llama_vocab_n_tokens(v);
        FILE * f = fopen(argv[4], "wb");
        if (!f) die("cannot write the output");
        char header[128];
        int h = snprintf(header, sizeof header,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, nv);
        int total = 10 + h + 1;
        int pad = (64 - total % 64) % 64;
        fwrite("\x93NUMPY\x01\x00", 1, 8, f);
        uint16_t hl = (uint16_t) (h + pad + 1);
        fwrite(&hl, 2, 1, f);
        fwrite(header, 1, (size_t) h, f);
        for (int i = 0; i < pad; i++) fputc(' ', f);
        fputc('\n', f);
        for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), 4, (size_t) nv, f);
        fclose(f);
        llama_batch_free(b);
        llama_free(ctx);
    } else {
        die("unknown command");
    }
    return 0;
}
