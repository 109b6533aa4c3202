// kvc_serve: continuous batching over a tiny transformer whose KV cache and attention go through
// libkvc, with every generated token checked against a dense reference. See README.md.
#include <kvc/kvc.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "device_memory.hpp"
#include "engine.hpp"
#include "model.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "replicated_pool.hpp"
#include "svg_plot.hpp"
#include "workload.hpp"

namespace {

using namespace serve;

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "kvc_serve: %s\n\n%s", msg.c_str(), kUsage);
    return 2;
}

std::string bytes_str(double b) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (b >= 1024 && u < 3) {
        b /= 1024;
        u++;
    }
    char s[32];
    std::snprintf(s, sizeof s, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return s;
}

std::string percent(int64_t part, int64_t whole) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
    return s;
}

// The host and disk tiers, when there is a disk tier (--disk-blocks).
void print_disk_report(const Options &o, const EngineConfig &ec, const EngineReport &r) {
    const TierFigures &h = r.host, &d = r.disk;
    const double block = double(r.bytes_per_block);  // all pools' and ranks' bytes of one block
    std::printf("host tier     %lld blocks (%s): %lld blocks in (swaps and spills), %lld out towards the device; "
                "%lld prefix hits; %lld evictions (to disk, unless already there); %lld cached at the end\n",
                (long long)h.capacity_blocks, bytes_str(double(h.capacity_blocks) * block / double(r.pools.size())).c_str(),
                (long long)h.blocks_in, (long long)h.blocks_out, (long long)h.hits, (long long)h.evictions,
                (long long)h.cached_blocks);
    std::printf("disk tier     %lld blocks (%s) in %s%s%s (%s, %s%s): host->disk %s (%lld blocks), disk->host %s "
                "(%lld blocks); %lld prefix hits; %lld evictions; %lld cached at the end; %lld recovered at "
                "startup (%lld foreign: another model's, pool's or rank's); %lld failures (%lld checksum, "
                "%lld I/O); %lld admissions hit less than kvc_prefix_lookup had said\n",
                (long long)d.capacity_blocks, bytes_str(double(d.capacity_blocks) * block / double(r.pools.size())).c_str(),
                o.disk_file.c_str(), r.pools.size() > 1 ? ".{L,G}" : "", r.tp > 1 ? ".rank*" : "",
                d.persistent ? "persistent" : "truncated at attach", d.io_uring ? "io_uring" : "pread/pwrite",
                d.direct_io ? ", O_DIRECT" : "", bytes_str(double(d.bytes_in)).c_str(), (long long)d.blocks_in,
                bytes_str(double(d.bytes_out)).c_str(), (long long)d.blocks_out, (long long)d.hits,
                (long long)d.evictions, (long long)d.cached_blocks, (long long)r.recovered_at_start,
                (long long)r.foreign_at_start,
                (long long)d.failures, (long long)d.checksum_failures, (long long)d.io_errors, (long long)r.short_hits);
}

// The restart (--restart-at), with or without a disk tier.
void print_restart_report(const EngineConfig &ec, const EngineReport &r) {
    if (!r.restarted) {
        std::printf("restart       not reached (the run ended before step %lld)\n", (long long)ec.restart_at_step);
        return;
    }
    const RestartFigures &rf = r.restart;
    std::string shutdown;
    if (rf.flushed)
        shutdown = "flushed: " + std::to_string(rf.device_cached_at_shutdown) + " device and " +
                   std::to_string(rf.host_cached_at_shutdown) + " host-tier cached blocks written to disk by "
                   "kvc_tier_flush, " + std::to_string(rf.flush_disk_writes) + " disk writes";
    else
        shutdown = (r.disk_attached ? "not flushed: " : "") + std::to_string(rf.device_cached_at_shutdown) +
                   " device and " + std::to_string(rf.host_cached_at_shutdown) + " host-tier cached blocks " +
                   (r.disk_attached ? "left above the disk (lost)" : "lost with the pools");
    const char *kind = !r.disk_attached      ? "cold: no disk tier"
                       : ec.disk.persistent ? "warm: disk re-attached KVC_DISK_PERSISTENT"
                                            : "cold: disk re-attached truncated";
    std::printf("restart       at step %lld (%s): %lld running and %lld swapped-out samples drained (freed, "
                "re-admitted first: %lld tokens); %s; %s; %lld blocks on disk at shutdown; recovered_blocks %lld\n",
                (long long)r.restart_step, kind,
                (long long)r.drained_running, (long long)r.drained_swapped, (long long)r.drained_tokens,
                r.restart_reset ? "kvc_prefix_cache_reset first" : "no cache reset", shutdown.c_str(),
                (long long)rf.disk_cached_kept, (long long)rf.recovered_blocks);
    std::printf("after restart %lld tokens admitted, %lld hit (%s), %lld computed; %lld prefix blocks (%lld tokens) "
                "came from disk; the drained samples re-prefilled %lld of %lld tokens\n",
                (long long)r.after_admitted_tokens, (long long)r.after_hit_tokens,
                percent(r.after_hit_tokens, r.after_admitted_tokens).c_str(), (long long)r.after_prefill_computed,
                (long long)r.after_disk_hits, (long long)(r.after_disk_hits * ec.block_size),
                (long long)(r.drained_readmitted_tokens - r.drained_hit_tokens), (long long)r.drained_readmitted_tokens);
}

void print_report(const Options &o, const ModelConfig &mc, int64_t params, const Workload &w, const EngineConfig &ec,
                  const EngineReport &r) {
    const char *dtype = ec.kv_dtype == KVC_DTYPE_F16 ? "f16" : "f32";
    std::printf("kvc_serve — libkvc %s, %s backend, KV cache %s\n", kvc_version_string(),
                ec.backend == KVC_BACKEND_CUDA ? "CUDA" : "CPU", dtype);
    std::printf("model         vocab %d, d_model %d, %d layers, %d query / %d KV heads (GQA), head_dim %d, SwiGLU %d, "
                "RoPE; %.2f M random parameters (seed %llu)\n",
                mc.vocab, mc.d_model, mc.num_layers, mc.num_q_heads, mc.num_kv_heads, mc.head_dim, mc.ffn_dim,
                double(params) / 1e6, (unsigned long long)o.seed);
    if (r.one_pool)
        std::printf("pool          one hybrid pool (kvc_pool_create_hybrid): %lld pages x %d tokens, %s per page, "
                    "%s of KV storage; groups SLIDING (window %d) and FULL draw pages from one free list\n",
                    (long long)ec.num_blocks, ec.block_size, bytes_str(double(r.bytes_per_block)).c_str(),
                    bytes_str(double(r.kv_bytes)).c_str(), r.window);
    else if (r.hybrid)
        std::printf("pools         L %lld blocks and G %lld blocks x %d tokens, %s per block in each (%s per token "
                    "position in both), %s of KV storage in all\n",
                    (long long)r.pools[0].num_blocks, (long long)r.pools[1].num_blocks, ec.block_size,
                    bytes_str(double(r.pools[0].bytes_per_block)).c_str(),
                    bytes_str(double(r.bytes_per_block) / double(ec.block_size)).c_str(),
                    bytes_str(double(r.kv_bytes)).c_str());
    else
        std::printf("pool          %lld blocks x %d tokens = %lld token slots, %s per block, %s of KV storage\n",
                    (long long)ec.num_blocks, ec.block_size, (long long)(ec.num_blocks * ec.block_size),
                    bytes_str(double(r.bytes_per_block)).c_str(), bytes_str(double(r.kv_bytes)).c_str());
    std::printf("workload      %zu requests over %zu system prompts: %d multi-turn follow-ups, %d with 2-3 parallel "
                "samples; longest %lld tokens\n",
                w.requests.size(), w.system_prompts.size(), w.follow_ups, w.multi_sample, (long long)w.longest);
    std::printf("\n");
    std::printf("served        %lld requests (%lld samples), %lld tokens generated in %lld engine steps\n",
                (long long)r.requests_done, (long long)r.samples_done, (long long)r.generated_tokens, (long long)r.steps);
    std::printf("throughput    %.0f generated tokens/s (%.2f s in the engine; the reference check took %.2f s more)\n",
                r.engine_seconds > 0 ? double(r.generated_tokens) / r.engine_seconds : 0.0, r.engine_seconds,
                r.check_seconds);
    std::printf("batches       mean %.1f sequences, %.1f new tokens per step\n",
                r.steps ? double(r.batch_seqs_sum) / double(r.steps) : 0.0,
                r.steps ? double(r.batch_tokens_sum) / double(r.steps) : 0.0);
    if (r.one_pool)
        std::printf("prefix cache  hit rate %.1f%% (%lld of %lld prompt tokens at first admission not recomputed, one "
                    "coordinated hit for both groups); %lld evictions\n",
                    r.prompt_tokens ? 100.0 * double(r.hit_tokens) / double(r.prompt_tokens) : 0.0,
                    (long long)r.hit_tokens, (long long)r.prompt_tokens, (long long)r.evictions);
    else if (r.hybrid)
        std::printf("prefix cache  hit rate %.1f%% (%lld of %lld prompt tokens at first admission not recomputed, the "
                    "hit common to pools L and G); %lld evictions in both\n",
                    r.prompt_tokens ? 100.0 * double(r.hit_tokens) / double(r.prompt_tokens) : 0.0,
                    (long long)r.hit_tokens, (long long)r.prompt_tokens, (long long)r.evictions);
    else
        std::printf("prefix cache  hit rate %.1f%% (%lld of %lld prompt tokens at first admission not recomputed); pool "
                    "counter incl. re-admissions %.1f%%; %lld evictions\n",
                    r.prompt_tokens ? 100.0 * double(r.hit_tokens) / double(r.prompt_tokens) : 0.0,
                    (long long)r.hit_tokens, (long long)r.prompt_tokens, 100.0 * r.pool_hit_rate, (long long)r.evictions);
    std::printf("blocks        utilization peak %.1f%% (%lld of %lld blocks in use%s), mean %.1f%%\n",
                100.0 * r.peak_utilization, (long long)r.peak_used_blocks,
                (long long)r.timeline.total_blocks, r.one_pool ? " of the hybrid pool" : r.hybrid ? " in pools L + G" : "",
                100.0 * r.mean_utilization);
    if (r.swap_available)
        std::printf("preemptions   %lld swap, %lld recompute (%lld tokens recomputed)\n", (long long)r.swap_preemptions,
                    (long long)r.recompute_preemptions, (long long)r.recomputed_tokens);
    else
        std::printf("preemptions   %lld recompute (%lld tokens recomputed); swap: %s\n", (long long)r.recompute_preemptions,
                    (long long)r.recomputed_tokens, r.swap_unavailable.c_str());
    if (r.swap_available)
        std::printf("tiers         host tier: device->host %s, host->device %s (swaps and spilled prefix blocks); "
                    "%lld prefix blocks re-hit from the host tier\n",
                    bytes_str(double(r.bytes_to_host)).c_str(), bytes_str(double(r.bytes_to_device)).c_str(),
                    (long long)r.host_prefix_hits);
    else
        std::printf("tiers         bytes moved: device->host 0 B, host->device 0 B (no host tier)\n");
    if (r.disk_attached) print_disk_report(o, ec, r);
    if (r.disk_attached || ec.restart_at_step >= 0)
        std::printf("prefill       %lld prompt tokens computed over the run (first admissions and re-admissions)\n",
                    (long long)r.prefill_computed);
    if (ec.restart_at_step >= 0) print_restart_report(ec, r);
    std::printf("copy-on-write %lld block copies after %lld forks\n", (long long)r.cow_copies, (long long)r.forks);
    if (r.speculate > 0) {
        std::printf("speculation   up to %d n-gram drafts per sample-step: %lld drafted, %lld accepted (acceptance "
                    "%.1f%%); %lld of %lld decode steps verified drafts, %lld kept all; %.2f tokens per verify step "
                    "(%.2f per decode step); %lld draft cut-backs (pool full)\n",
                    r.speculate, (long long)r.drafted_tokens, (long long)r.accepted_tokens,
                    r.drafted_tokens ? 100.0 * double(r.accepted_tokens) / double(r.drafted_tokens) : 0.0,
                    (long long)r.verify_steps, (long long)r.decode_steps, (long long)r.full_accepts,
                    r.verify_steps ? double(r.verify_generated) / double(r.verify_steps) : 0.0,
                    r.decode_steps ? double(r.decode_steps + r.accepted_tokens) / double(r.decode_steps) : 0.0,
                    (long long)r.draft_cutbacks);
        std::printf("rollback      %lld kvc_truncate calls freed %lld blocks\n", (long long)r.truncates,
                    (long long)r.truncate_freed_blocks);
    } else {
        std::printf("speculation   off (--speculate K to draft up to K tokens per step)\n");
    }
    const double steps = r.steps > 0 ? double(r.steps) : 1.0;
    if (r.one_pool) {
        const PoolReport &p = r.pools[0];
        std::printf("window        %d tokens in layers 0, 2 (SLIDING group; layers 1, 3 attend to everything, FULL "
                    "group), one hybrid pool: pages in use peak %lld, mean %.1f; a decoding sequence held at most "
                    "%lld pages of its SLIDING group (mean %.1f; window / block size + 2 = %d)\n",
                    r.window, (long long)p.peak_used_blocks, double(p.used_block_steps) / steps,
                    (long long)r.window_held_peak,
                    r.window_held_samples ? double(r.window_held_sum) / double(r.window_held_samples) : 0.0,
                    r.window / ec.block_size + 2);
    } else if (r.hybrid) {
        const PoolReport &l = r.pools[0], &g = r.pools[1];
        auto layer_list = [](const PoolReport &p) {
            std::string s;
            for (int32_t x : p.layers) s += (s.empty() ? "" : ", ") + std::to_string(x);
            return s;
        };
        std::printf("window        %d tokens in layers %s (pool L; layers %s attend to everything, pool G), blocks "
                    "before it released in pool L: its device blocks in use peak %lld, mean %.1f; the running "
                    "sequences' tables spanned peak %lld, mean %.1f distinct blocks (what pool L would hold without "
                    "the window)\n",
                    r.window, layer_list(l).c_str(), layer_list(g).c_str(), (long long)l.peak_used_blocks,
                    double(l.used_block_steps) / steps, (long long)r.peak_span_blocks, double(r.span_block_steps) / steps);
        // The pools' own hit counters see only the c + 1 tokens kvc_alloc gets (c hit), so the
        // report gives what each pool alone would have hit at first admission instead.
        auto own = [&r](const PoolReport &p) {
            return r.prompt_tokens ? 100.0 * double(p.own_hit_tokens) / double(r.prompt_tokens) : 0.0;
        };
        std::printf("hybrid        pool L (window %d): device blocks peak %lld, mean %.1f; alone it would have hit "
                    "%.1f%% of the prompt tokens; %lld evictions; a decoding sequence held at most %lld of its blocks "
                    "(mean %.1f; window / block size + 2 = %d)\n",
                    l.window, (long long)l.peak_used_blocks, double(l.used_block_steps) / steps, own(l),
                    (long long)l.evictions, (long long)r.window_held_peak,
                    r.window_held_samples ? double(r.window_held_sum) / double(r.window_held_samples) : 0.0,
                    r.window / ec.block_size + 2);
        std::printf("hybrid        pool G (full attention): device blocks peak %lld, mean %.1f; alone it would have "
                    "hit %.1f%%; %lld evictions; both started every prompt at their common hit (%.1f%%); %lld "
                    "admissions undone (one pool short after the other took the prompt); %lld swap-outs stopped half "
                    "way and %lld swap-ins dropped (recomputed instead)\n",
                    (long long)g.peak_used_blocks, double(g.used_block_steps) / steps, own(g), (long long)g.evictions,
                    r.prompt_tokens ? 100.0 * double(r.hit_tokens) / double(r.prompt_tokens) : 0.0,
                    (long long)r.alloc_rollbacks, (long long)r.partial_swap_outs, (long long)r.dropped_swap_ins);
    } else if (r.window > 0) {
        std::printf("window        %d tokens in every layer, blocks before it released (kvc_pool_set_sliding_window): "
                    "device blocks in use peak %lld, mean %.1f; the running sequences' tables spanned peak %lld, "
                    "mean %.1f distinct blocks (what they would hold without the window)\n",
                    r.window, (long long)r.peak_used_blocks, double(r.used_block_steps) / steps,
                    (long long)r.peak_span_blocks, double(r.span_block_steps) / steps);
    } else {
        std::printf("window        off (--window W for sliding-window attention with block release)\n");
    }
    if (r.tp > 1)
        std::printf("tensor parallel %d ranks (%d KV head%s each): %lld calls fanned out, every decision identical; "
                    "per-rank KV storage %s\n",
                    r.tp, mc.num_kv_heads / r.tp, mc.num_kv_heads / r.tp == 1 ? "" : "s", (long long)r.fanned_calls,
                    bytes_str(double(r.rank_kv_bytes)).c_str());
    else
        std::printf("tensor parallel off (--tp N: the KV heads sharded over N lockstep pools)\n");
    std::printf("correctness   %lld generated tokens of %lld samples checked against a dense reference: max |logit "
                "diff| %.2e (tolerance %.0e) -- OK\n",
                (long long)r.checked_tokens, (long long)r.checked_samples, r.max_abs_diff, ec.tolerance);
    std::printf("outputs       digest %016llx (every sample's generated tokens; same seed, same digest with or without "
                "--speculate, for any --tp)\n",
                (unsigned long long)r.output_digest);
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    std::string err;
    if (!parse_options(argc, argv, &o, &err)) return usage_error(err);
    if (o.help) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    ModelConfig mc;
    EngineConfig ec;
    if (o.backend == "cuda") {
        std::string why;
        int32_t devices = 0;
        if (!device_usable(&why) || kvc_cuda_device_count(&devices) != KVC_OK || devices == 0) {
            if (why.empty()) why = "libkvc sees no CUDA device";
            // Exit status 77 and this wording let test harnesses report "skipped" on machines without a GPU.
            std::fprintf(stderr, "kvc_serve: SKIPPED --backend cuda: %s\n", why.c_str());
            return 77;
        }
        ec.backend = KVC_BACKEND_CUDA;
        // libkvc's CUDA kernels are built for head dims 64, 80, 96, 128 and 256 (the CPU backend takes
        // any); the same 8 query / 2 KV heads with head_dim 64.
        mc.head_dim = 64;
    }
    ec.block_size = o.block_size;
    ec.num_blocks = o.blocks;
    ec.window_blocks = o.window_blocks;
    ec.kv_dtype = o.kv_dtype;
    ec.check_every = o.check_every;
    ec.seed = o.seed;
    ec.corrupt_kv_at_step = o.corrupt_kv_at;
    ec.host_blocks = o.host_blocks;
    ec.speculate = o.speculate;
    ec.window = o.window;
    ec.hybrid = o.hybrid;
    ec.two_pools = o.two_pools;
    ec.corrupt_kv_group = o.corrupt_kv_pool == "G" ? 1 : 0;
    if (o.tp > mc.num_kv_heads || mc.num_kv_heads % o.tp != 0)
        return usage_error("--tp " + std::to_string(o.tp) + ": the model has " + std::to_string(mc.num_kv_heads) +
                           " KV heads, so each rank needs a whole number of them: --tp must divide " +
                           std::to_string(mc.num_kv_heads));
    ec.tp = o.tp;
    ec.tp_skew_at_step = o.tp_skew_at;
    ec.disk.blocks = o.disk_blocks;
    ec.disk.path = o.disk_file;
    ec.disk.persistent = o.disk_persistent;
    ec.restart_at_step = o.restart_at;
    ec.reset_before_restart = o.reset_before_restart;
    ec.flush_before_restart = o.flush_before_restart;
    {
        // The file outlives the process, and libkvc identifies a block by its tokens and the file by
        // the KV layout, not by the weights that computed it: a file left by a run with another
        // seed, window or model would serve wrong KV. The model's identity, attached with the file
        // (kvc_tier_attach_disk_with_identity), keeps such blocks from ever being recovered.
        char identity[200];
        std::snprintf(identity, sizeof identity,
                      "kvc_serve model seed %llu vocab %d d_model %d layers %d heads %d/%d head_dim %d ffn %d "
                      "rope %g window %d%s",
                      (unsigned long long)o.seed, mc.vocab, mc.d_model, mc.num_layers, mc.num_q_heads,
                      mc.num_kv_heads, mc.head_dim, mc.ffn_dim, double(mc.rope_theta), o.window,
                      o.hybrid ? " hybrid" : "");
        ec.disk.identity = identity;
    }
    if (o.disk_blocks > 0) {
        // libkvc creates the file, not its directory.
        std::error_code fs_err;
        const std::filesystem::path dir = std::filesystem::path(o.disk_file).parent_path();
        if (!dir.empty()) std::filesystem::create_directories(dir, fs_err);
    }
    ec.temperature = float(o.temperature);
    // f16 rounding is mirrored by the reference, so only summation order differs: same tolerance.
    ec.tolerance = 2e-3;
    Workload w = make_workload(o.requests, mc.vocab, o.seed, ec.max_seq_len, o.max_new_tokens);
    // The longest sequence must fit in the pool next to the 1% watermark, or it could never run.
    const int64_t need = (w.longest + o.block_size - 1) / o.block_size;
    if (double(o.blocks - need) < 0.01 * double(o.blocks) || need > o.blocks)
        return usage_error("--blocks " + std::to_string(o.blocks) + " is too small: the longest request (" +
                           std::to_string(w.longest) + " tokens) needs " + std::to_string(need) +
                           " blocks of " + std::to_string(o.block_size) + " plus the 1% watermark");
    // Pool L too: a prompt (or a preempted sequence's recompute) is allocated whole before its
    // first decode step releases anything.
    const int64_t l_blocks = o.window_blocks;
    if (l_blocks > 0 && (double(l_blocks - need) < 0.01 * double(l_blocks) || need > l_blocks))
        return usage_error("--window-blocks " + std::to_string(l_blocks) + " is too small: the longest request (" +
                           std::to_string(w.longest) + " tokens) needs " + std::to_string(need) +
                           " blocks of " + std::to_string(o.block_size) + " plus the 1% watermark, all at once in a "
                           "prefill");

    Model model = Model::random(mc, o.seed);
    ProgressBar bar(!o.quiet);
    EngineReport report;
    try {
        report = run_engine(model, w, ec, [&](int64_t done, int64_t total, const EngineReport &r) {
            const double secs = r.timeline.steps.empty() ? 0.0 : r.timeline.steps.back().seconds;
            const auto &last = r.timeline.steps;
            double util = last.empty() ? 0.0 : double(last.back().used_blocks) / double(r.timeline.total_blocks);
            bar.update(done, total, secs > 0 ? double(r.generated_tokens) / secs : 0.0, util,
                       r.recompute_preemptions + r.swap_preemptions);
        });
    } catch (const LockstepError &e) {
        bar.finish();
        std::fprintf(stderr, "kvc_serve: TENSOR-PARALLEL RANKS DISAGREE: %s\nkvc_serve: no plot written\n", e.what());
        return 1;
    } catch (const CorrectnessError &e) {
        bar.finish();
        std::fprintf(stderr, "kvc_serve: CORRECTNESS CHECK FAILED: %s\nkvc_serve: no plot written\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        bar.finish();
        std::fprintf(stderr, "kvc_serve: error: %s\nkvc_serve: no plot written\n", e.what());
        return 1;
    }
    bar.finish();
    print_report(o, mc, model.parameter_count(), w, ec, report);

    char subtitle[320];
    std::snprintf(subtitle, sizeof subtitle,
                  "%d requests, %lld blocks x %d tokens, KV %s%s; preemptions: %lld swap, %lld recompute; %lld COW copies; "
                  "hit rate %.1f%% at first admission",
                  o.requests, (long long)o.blocks, o.block_size, o.kv_dtype == KVC_DTYPE_F16 ? "f16" : "f32",
                  o.window > 0 ? ((o.hybrid ? (o.two_pools ? ", hybrid: pools L + G, window " : ", one hybrid pool, window ")
                                            : ", window ") +
                                  std::to_string(o.window))
                                     .c_str()
                               : "",
                  (long long)report.swap_preemptions, (long long)report.recompute_preemptions, (long long)report.cow_copies,
                  report.prompt_tokens ? 100.0 * double(report.hit_tokens) / double(report.prompt_tokens) : 0.0);
    std::string svg = render_occupancy_svg(report.timeline, "libkvc pool occupancy under kvc_serve", subtitle);
    if (!write_file_atomically(o.svg, svg, &err)) {
        std::fprintf(stderr, "kvc_serve: cannot write the plot: %s\n", err.c_str());
        return 1;
    }
    std::printf("plot          %s\n", o.svg.c_str());
    return 0;
}
