/*
 * presets.c: every model shape and every configuration of the paper's table (DHelix,
 * arXiv 2411.15871, as summarised in REFERENCE.md "The paper"), each number with its
 * source. Where the paper (as available to us) does not give a number, the entry says what
 * we assumed and the assumption is the same rule for every configuration: no preset is
 * tuned to match its result.
 *
 * Assumptions common to the paper's presets:
 * - Sequence length: GPT 2048 (the GPT-3 context, Brown et al. 2020), Llama 4096 (the
 *   Llama-2 context, Touvron et al. 2023); Llama-66B uses the paper's 16K / 32K.
 * - Global batch: 128 sequences on the A40 (the vgpu's own GPT-30B scale test uses the
 *   same); Llama-66B keeps 512K tokens per batch like the A40 Llama presets (4096 x 128):
 *   32 sequences at 16K, 16 at 32K. Micro-batch 1 everywhere.
 * - Megatron baseline options: sequence parallelism with TP > 1, distributed optimizer,
 *   --overlap-grad-reduce, bf16, flash attention, untied embeddings, no recomputation.
 * - Virtual pipeline stages (`--vpp preset`, not applied by default: the presets run
 *   Megatron's non-interleaved 1F1B, which the paper's numbers are compared against): the
 *   paper does not say whether its Megatron baseline interleaved. Assumed: 2 virtual
 *   stages per rank, the smallest interleaving, and the one Megatron's own large-model
 *   runs use most (NVIDIA/Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh,
 *   Narayanan et al. 2021 Table 1: 145B and 310B at 2, 76B and 530B at 3, 39B with PP 2
 *   not interleaved). Every PP preset allows it: 48 or 80 layers make 24 or 40 per rank,
 *   even, and 16 or 32 micro-batches per data-parallel rank, multiples of pp = 2.
 */
#include "presets.h"

#include <string.h>

static const wl_model_preset_t models[] = {
    /* GPT-3 6.7B: Brown et al. 2020, Table 2.1 (32 layers, d_model 4096, 32 heads), GPT-2
     * vocabulary 50257, FFN 4h. */
    {"gpt-6.7b", {"gpt-6.7b", WL_GPT, 32, 4096, 32, 32, 16384, 50257, 2048, 0, 0},
     "GPT-3 6.7B, Brown et al. 2020 Table 2.1"},
    /* Megatron's 18.4B model: Narayanan et al. 2021 (arXiv 2104.04473) Table 1: 40 layers,
     * hidden 6144, 48 heads. */
    {"gpt-18b", {"gpt-18b", WL_GPT, 40, 6144, 48, 48, 24576, 50257, 2048, 0, 0},
     "Megatron-LM 18.4B, Narayanan et al. 2021 Table 1"},
    /* Assumed: 48 layers, hidden 7168, 56 heads (29.6B in the layers), the shape the vgpu's
     * GPT-30B scale test uses; the paper's shape was not available. */
    {"gpt-30b", {"gpt-30b", WL_GPT, 48, 7168, 56, 56, 28672, 50257, 2048, 0, 0},
     "assumed: 48 x 7168, 56 heads (as tests/vgpu/tests/test_scale.c)"},
    /* Meta Llama 3 8B (config.json): 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN
     * 14336, vocabulary 128256. */
    {"llama-8b", {"llama-8b", WL_LLAMA, 32, 4096, 32, 8, 14336, 128256, 4096, 0, 0},
     "Llama 3 8B config.json"},
    /* Assumed: the GPT-18B layer shape with SwiGLU at FFN 4h and the Llama-2 vocabulary
     * 32000: 40 x (4h^2 + 12h^2) + 2 x 32000 x 6144 = 24.6B parameters, i.e. "25B". */
    {"llama-25b", {"llama-25b", WL_LLAMA, 40, 6144, 48, 48, 24576, 32000, 4096, 0, 0},
     "assumed: GPT-18B layers with SwiGLU (FFN 4h), vocabulary 32000 -> 24.6B"},
    /* Assumed likewise from GPT-30B: 48 x 16h^2 + 2 x 32000 x 7168 = 39.9B parameters. */
    {"llama-39b", {"llama-39b", WL_LLAMA, 48, 7168, 56, 56, 28672, 32000, 4096, 0, 0},
     "assumed: GPT-30B layers with SwiGLU (FFN 4h), vocabulary 32000 -> 39.9B"},
    /* Assumed: the LLaMA-65B shape (Touvron et al. 2023a, Table 2: 80 layers, hidden 8192,
     * 64 heads; FFN 22016), 65.3B parameters. */
    {"llama-66b", {"llama-66b", WL_LLAMA, 80, 8192, 64, 64, 22016, 32000, 16384, 0, 0},
     "assumed: LLaMA-65B, Touvron et al. 2023 Table 2 (65.3B)"},
    /* Test shapes: small enough for real math on the CPU. The vocabulary, 512, is its own
     * padding for tp <= 4, so runs with different tp see the same softmax (Megatron's
     * padded logits take part in it). */
    {"gpt-tiny", {"gpt-tiny", WL_GPT, 2, 64, 4, 4, 256, 512, 32, 0, 0}, "test"},
    {"llama-tiny", {"llama-tiny", WL_LLAMA, 2, 64, 4, 2, 128, 512, 32, 0, 0}, "test"},
    {"moe-tiny", {"moe-tiny", WL_LLAMA, 2, 64, 4, 2, 64, 512, 32, 4, 2}, "test"},
};

/* The paper's table (REFERENCE.md): TFLOP/s per GPU, Megatron -> DHelix, with (DP, TP, PP)
 * and, for Llama-66B, CP. 64 x A40 with 100 Gb/s InfiniBand; 64 x A800. Then the two
 * Hopper configurations of the authors' corrected report (MFU points gained). */
static const wl_run_preset_t presets[] = {
    {"llama-8b-a40", "llama-8b", 16, 4, 1, 1, 1, 128, 4096, "a40", 64.4, 84.1,
     "paper: Llama-8B (16,4,1)", 0, 0, 0},
    {"llama-25b-a40", "llama-25b", 8, 8, 1, 1, 1, 128, 4096, "a40", 53.9, 75.7,
     "paper: Llama-25B (8,8,1)", 0, 0, 0},
    {"llama-39b-a40", "llama-39b", 4, 8, 2, 1, 1, 128, 4096, "a40", 68.1, 86.3,
     "paper: Llama-39B (4,8,2)", 0, 0, 2},
    {"gpt-6.7b-a40", "gpt-6.7b", 16, 4, 1, 1, 1, 128, 2048, "a40", 61.6, 77.4,
     "paper: GPT-6.7B (16,4,1)", 0, 0, 0},
    {"gpt-18b-a40", "gpt-18b", 8, 8, 1, 1, 1, 128, 2048, "a40", 40.6, 56.9,
     "paper: GPT-18B (8,8,1)", 0, 0, 0},
    {"gpt-30b-a40", "gpt-30b", 4, 8, 2, 1, 1, 128, 2048, "a40", 57.8, 78.6,
     "paper: GPT-30B (4,8,2)", 0, 0, 2},
    {"llama-66b-16k-a800", "llama-66b", 2, 8, 2, 2, 1, 32, 16384, "a800", 186.0, 199.7,
     "paper: Llama-66B 16K (DP2,TP8,CP2,PP2)", 0, 0, 2},
    {"llama-66b-32k-a800", "llama-66b", 1, 8, 2, 4, 1, 16, 32768, "a800", 160.9, 199.7,
     "paper: Llama-66B 32K (DP1,TP8,CP4,PP2)", 0, 0, 2},
    /* Hopper: the authors' corrected report (REFERENCE.md "Caution") gives MFU gains only,
     * +3..6 points on 8 x H200 and +5.9..11.1 on 32 x H800, without the models or layouts,
     * and no TFLOP/s (megatron and dhelix are 0). Assumed: the layouts of the paper's table
     * shrunk to the GPU count by data parallelism alone. 8 x H200 (one node): the A40
     * Llama-8B layout, TP 4, with DP 2; 512K tokens per batch like the A40 Llama presets. */
    {"llama-8b-h200", "llama-8b", 2, 4, 1, 1, 1, 128, 4096, "h200", 0, 0,
     "authors' Hopper report, 8 x H200 (layout assumed)", 3.0, 6.0, 0},
    /* 32 x H800: the A800 Llama-66B 16K layout (TP 8, CP 2, PP 2) with DP 1, 32 sequences of
     * 16K as there. An H800 is an H100 with NVLink cut to 400 GB/s (NVIDIA's bidirectional
     * figure, against the H100's 900); the vgpu has no h800 profile, so this runs on the
     * h100 one (450 GB/s per direction): tensor-parallel traffic costs less here than on an
     * H800, which leaves less communication for SI to hide. */
    {"llama-66b-16k-h800", "llama-66b", 1, 8, 2, 2, 1, 32, 16384, "h100", 0, 0,
     "authors' Hopper report, 32 x H800 (layout assumed; h100 profile)", 5.9, 11.1, 2},
};

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

const wl_model_preset_t *wl_find_model(const char *name)
{
    for (int i = 0; i < COUNT(models); i++)
        if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

const wl_run_preset_t *wl_find_preset(const char *name)
{
    for (int i = 0; i < COUNT(presets); i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

const wl_run_preset_t *wl_paper_presets(int *n)
{
    *n = COUNT(presets);
    return presets;
}

void wl_list_presets(FILE *f)
{
    fprintf(f, "models:\n");
    for (int i = 0; i < COUNT(models); i++) {
        const wl_model_t *m = &models[i].m;
        fprintf(f, "  %-11s %-5s L%-3d h%-5d heads %-3d kv %-3d ffn %-6d vocab %-6d  %s\n", models[i].name,
                m->arch == WL_GPT ? "gpt" : "llama", m->layers, m->hidden, m->heads, m->kv_heads, m->ffn,
                m->vocab, models[i].source);
    }
    fprintf(f, "paper presets (processes: pp x cp, representative ranks, timing-only):\n");
    for (int i = 0; i < COUNT(presets); i++) {
        const wl_run_preset_t *p = &presets[i];
        fprintf(f, "  %-19s %-10s dp %-2d tp %d pp %d cp %d gbs %-3d seq %-5d %-4s ", p->name, p->model, p->dp,
                p->tp, p->pp, p->cp, p->gbs, p->seq, p->device);
        if (p->megatron > 0)
            fprintf(f, "Megatron %5.1f -> DHelix %5.1f TFLOP/s  %s\n", p->megatron, p->dhelix, p->source);
        else
            fprintf(f, "MFU +%.1f..%.1f points  %s\n", p->mfu_gain_lo, p->mfu_gain_hi, p->source);
    }
}
