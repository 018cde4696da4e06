"""tap - run the Python test modules (tests/python/test_*.py) and print TAP.

    /usr/bin/python3 tests/python/tap.py [test_module ...]

One line per test: "ok N - name", "not ok N - name" (with the traceback as "#"
comment lines), "not ok N # SKIP name: reason" (the form tests/run.sh counts).
Exit status 1 when a test failed. unittest underneath; a GmTest subclass lists
what it needs in `needs` ("lib", "numpy", "torch", "torchvision", "cc", "PIL"),
and each test is skipped, with the reason, when a need is missing.

Under a sanitizer build (GM_SANITIZER set: tests/test_python.sh sets it when it
preloads ASan for an instrumented libgoldminer) the tests of SANITIZER_SKIP skip
with their reason; every test still runs in make test. A name in SANITIZER_SKIP
that no test has fails (a test renamed would otherwise run under ASan unseen).

A test that runs past GM_PYTEST_TEST_TIMEOUT seconds (default 240: the longest
takes about 35 s under ASan) ends the run: every thread's Python stack (the
test's method among the frames) on stdout, exit status 1. A hang then names
itself in the log, where tests/run.sh's limit on the whole file stopped it
minutes later in silence (CI's sanitize stage, 2026-12-04: test_python.sh idle
until its 600 s, passing when run again).

GM_PYTEST_ONLY="GLOB[,GLOB...]" runs only the tests whose name (module.method)
matches one of the globs, e.g. GM_PYTEST_ONLY='*fork*' sh tests/test_python.sh
test_dataloader.
"""
import faulthandler
import fnmatch
import importlib
import os
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# What make sanitize leaves out, and why. ASan checks only libgoldminer's C code
# (and the goldminer binary's), not Python's: a test earns its minutes under ASan
# (5 to 8 times its plain time: torch imports under ASan, every exec'd worker
# preloads it) when it drives C code with inputs no other test run under ASan
# gives it. Run under ASan, so not listed: test_abi, test_loader, test_torch,
# test_lifecycle, test_hybrid (the ctypes binding over loader.h, hybrid.h, ring
# views: every call's buffers and sizes come from Python); from test_dataloader,
# one test per C path of the Python workers (bind.h on both sides, pool.c's exec
# mode and zygote, the re-issue with kept items, quarantine, -EMSGSIZE, the
# persistent pool's parked and given tasks, error records, ring views and pinning,
# the node agent's CMDJOB and a dead agent); from test_run, the C and hybrid
# paths and cmd/run.c; test_plan's C draws, jitter and resize (the photos).
PURE = "pure Python (%s): no call into libgoldminer that a test run under ASan does not make"
DL_SEMANTICS = PURE % "DataLoader semantics, checked by make test"
RUN_PY = PURE % "goldminer run's argv, exit status and script handling"
PLAN_TEXT = PURE % "the plan read off torchvision objects"
BIND = ("its C path (pool.c, bind.c) runs under ASan in test_bind%s and in the tests of "
        "test_dataloader kept under ASan; the rest is Python")
DUP = "its C path runs under ASan in %s; the rest is Python"
SANITIZER_SKIP = {
    # test_dataloader.TestDataLoader: the trainer's Python over the same C calls
    "test_dataloader.test_every_kind_of_collate_result_comes_back_as_it_went": DL_SEMANTICS,
    "test_dataloader.test_torch_differs_with_1_and_2_workers_goldminer_does_not": DL_SEMANTICS,
    "test_dataloader.test_epochs_differ_and_each_iteration_is_one_epoch": DL_SEMANTICS,
    "test_dataloader.test_persistent_workers_keep_their_processes_and_the_bytes":
        DUP % "test_persistent_probe_that_fits_serves_every_epoch",
    "test_dataloader.test_persistent_epoch_left_half_way_restarts_cleanly":
        DUP % "test_persistent_probe_that_fits_serves_every_epoch",
    "test_dataloader.test_persistent_epochs_shorter_than_the_ring_give_the_same_bytes":
        BIND % "'s test_tasks_given_after_start_reach_workers_and_none_is_claimed_empty",
    "test_dataloader.test_persistent_short_epoch_left_half_way_then_whole_ones":
        DUP % "test_persistent_sampler_whose_length_changes_between_epochs",
    "test_dataloader.test_replacements_fork_from_the_zygote_and_are_reaped_here":
        BIND % "'s test_replacements_fork_from_the_zygote_as_our_children",
    "test_dataloader.test_worker_ids_are_0_to_n_and_a_replacement_takes_the_dead_ones":
        BIND % "'s test_workers_have_ids_0_to_n_and_a_replacement_takes_the_dead_ones",
    "test_dataloader.test_sigkilled_worker_mid_batch_gives_the_same_bytes":
        DUP % "test_reissued_batch_resumes_after_what_the_dead_worker_finished",
    "test_dataloader.test_items_of_a_dataset_that_says_so_are_made_again_not_kept": DL_SEMANTICS,
    "test_dataloader.test_worker_that_exits_in_the_dataset_costs_a_reissue":
        BIND % "'s test_sigkilled_worker_mid_batch_loses_nothing",
    "test_dataloader.test_sample_that_crashes_workers_fails_the_batch_with_its_index":
        DUP % "test_sample_that_crashes_two_workers_is_quarantined_and_skipped",
    "test_dataloader.test_sample_0_that_segfaults_is_reported_by_a_worker_not_the_trainer":
        DUP % "test_sample_that_crashes_two_workers_is_quarantined_and_skipped",
    "test_dataloader.test_worker_that_exits_on_sample_0_costs_a_reissue":
        BIND % "'s test_worker_fatal_error_reaches_the_consumer",
    "test_dataloader.test_first_batch_bigger_than_the_first_guess_sizes_the_slots":
        BIND % "'s test_sparse_pool_allocates_only_what_workers_write_and_is_not_pinned "
        "(and -EMSGSIZE in test_batch_bigger_than_its_slot_is_an_error_naming_the_option)",
    "test_dataloader.test_first_batch_that_fits_the_probe_goes_on_with_one_zygote":
        BIND % "'s test_sparse_pool_allocates_only_what_workers_write_and_is_not_pinned",
    "test_dataloader.test_probe_the_memory_limit_refuses_falls_back_to_a_1_mib_guess":
        DUP % "test_ring (gm_ring_admit's refusal under GM_MEM_LIMIT)",
    "test_dataloader.test_endless_transform_costs_reissues_never_a_hang":
        BIND % "'s test_stopped_lease_holder_loses_its_lease_at_the_deadline",
    "test_dataloader.test_auto_grows_for_a_hungry_trainer_and_shrinks_for_a_slow_one":
        BIND % "'s test_budget_grows_the_pool_for_a_hungry_consumer_and_shrinks_it",
    "test_dataloader.test_sigstopped_lease_holder_loses_its_lease_at_the_deadline":
        BIND % "'s test_stopped_lease_holder_loses_its_lease_at_the_deadline",
    "test_dataloader.test_exception_with_on_error_fail_raises_its_type_with_the_index":
        DUP % "test_exception_with_on_error_skip_substitutes_and_lists_it",
    "test_dataloader.test_unpicklable_attribute_is_refused_naming_it": DL_SEMANTICS,
    "test_dataloader.test_collate_result_the_ring_cannot_carry_is_refused_in_words": DL_SEMANTICS,
    "test_dataloader.test_state_dict_resumes_mid_epoch_with_the_same_bytes": DL_SEMANTICS,
    "test_dataloader.test_copies_kept_are_never_overwritten_and_dropped_ones_reuse_buffers":
        DL_SEMANTICS,
    "test_dataloader.test_refused_arguments_say_why": DL_SEMANTICS,
    # test_dataloader.TestNode: the agent's CMDJOB runs under ASan in
    # test_agent_runs_the_workers_with_the_same_bytes and test_node
    "test_dataloader.test_persistent_epochs_shorter_than_the_ring_through_the_agent":
        DUP % "test_agent_runs_the_workers_with_the_same_bytes and test_node",
    "test_dataloader.test_two_loaders_share_the_agents_budget":
        DUP % "test_node (the agent's division across jobs)",
    "test_dataloader.test_sigkilled_agent_leaves_no_zombie_and_no_orphan_worker":
        DUP % "test_agent_gone_mid_epoch_the_trainer_goes_on_with_the_same_bytes",
    "test_dataloader.test_node_needs_workers": DL_SEMANTICS,
    # test_dataloader.TestScript: a script's processes, Python's
    "test_dataloader.test_lambda_and_main_class_reach_the_workers": DL_SEMANTICS,
    "test_dataloader.test_dataset_whose_fork_returns_gives_the_same_bytes_and_the_fork_is_ended":
        BIND % "'s test_fork_of_a_worker_cannot_claim_or_publish_its_lease",
    "test_dataloader.test_helpers_a_dataset_forks_end_with_their_worker":
        BIND % "'s test_what_a_worker_forked_ends_with_the_worker",
    "test_dataloader.test_sigkilled_trainer_leaves_no_file_and_no_process":
        DUP % "test_lifecycle (a SIGKILLed consumer takes its workers along)",
    "test_dataloader.test_ctrl_c_leaves_no_process":
        DUP % "test_lifecycle (KeyboardInterrupt cleans up)",
    # test_run: kept are test_train_transform_is_served_in_c_and_hybrid_with_torchs_shapes
    # (the C and hybrid paths), test_the_binary_execs_the_named_interpreter (cmd/run.c)
    # and test_no_agent_at_the_socket_is_refused_in_words_and_the_script_not_started
    "test_run.test_argv_main_path_and_exit_status_are_the_scripts": RUN_PY,
    "test_run.test_uncaught_exception_and_signals_end_it_as_plain_python": RUN_PY,
    "test_run.test_a_missing_script_is_refused_as_python_does": RUN_PY,
    "test_run.test_every_name_is_served_with_torchs_batches": RUN_PY,
    "test_run.test_goldminer_plan_prints_each_plan_when_built": PLAN_TEXT,
    "test_run.test_the_torchvision_example_runs_plain_and_served":
        DUP % "test_train_transform_is_served_in_c_and_hybrid_with_torchs_shapes",
    "test_run.test_every_path_gets_its_batches_through_the_agent_with_the_same_bytes":
        DUP % "test_train_transform_is_served_in_c_and_hybrid_with_torchs_shapes, "
        "test_agent_runs_the_workers_with_the_same_bytes and test_node",
    # test_plan: the plan's text is Python; its C draws, jitter and resize run
    "test_plan.test_the_train_recipe_runs_whole_in_c": PLAN_TEXT,
    "test_plan.test_eval_and_uint8_and_converted_recipes_run_in_c": PLAN_TEXT,
    "test_plan.test_a_python_op_after_a_c_prefix_makes_a_hybrid": PLAN_TEXT,
    "test_plan.test_unsupported_parameters_and_orders_are_named": PLAN_TEXT,
    "test_plan.test_options_only_python_honours_keep_c_per_sample_in_a_hybrid": PLAN_TEXT,
    "test_plan.test_other_datasets_and_files_stay_in_python": PLAN_TEXT,
    "test_plan.test_v2_transforms_are_read_like_v1": PLAN_TEXT,
    "test_plan.test_the_ks_statistic_tells_a_wrong_distribution": PURE % "the KS statistic",
    # test_recipes: the samplers' tests run (the order through ctypes into the C
    # loader); the presets' are the plan's text, the spawn children's goldminer
    # run's environment over the same Python workers as test_run's
    "test_recipes.test_a_preset_holding_a_compose_is_planned_as_the_compose": PLAN_TEXT,
    "test_recipes.test_a_preset_whose_call_does_more_is_not_unwrapped_and_the_plan_says_why":
        PLAN_TEXT,
    "test_recipes.test_loaders_of_mp_spawn_and_multiprocessing_children_are_served": RUN_PY,
}


def sanitizer_skip(suite, result, modules):
    """Under GM_SANITIZER, mark SANITIZER_SKIP's tests skipped with their reason;
    always fail for a name of a loaded module (modules: those of the whole run;
    None: a run of named modules, not checked) that no test has."""
    seen = set()
    san = os.environ.get("GM_SANITIZER")
    for test in iter_tests(suite):
        name = TapResult._name(test)
        why = SANITIZER_SKIP.get(name)
        if why is None:
            continue
        seen.add(name)
        if san:
            method = getattr(test, test._testMethodName)
            setattr(test, test._testMethodName,
                    unittest.skip("under a sanitizer build (%s): %s" % (san, why))(method))
    if modules is not None:
        for name in sorted(n for n in set(SANITIZER_SKIP) - seen if n.split(".")[0] in modules):
            result.failed += 1
            result._emit("not ok %%d - tap.py: SANITIZER_SKIP names %s, which no test has" % name)


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0
        self.failed = 0
        self.t0 = 0.0

    @staticmethod
    def _name(test):
        return "%s.%s" % (type(test).__module__, getattr(test, "_testMethodName", str(test)))

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()
        limit = float(os.environ.get("GM_PYTEST_TEST_TIMEOUT") or 240)
        # faulthandler's own thread, which needs no GIL: it fires even while
        # the test holds it in C; the stack it prints names the test's method
        faulthandler.dump_traceback_later(limit, exit=True, file=sys.__stdout__)

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

    def _emit(self, line, diag=None):
        self.n += 1
        print(line % self.n, flush=True)
        if diag:
            for d in diag.rstrip().splitlines():
                print("# " + d, flush=True)

    def addSuccess(self, test):
        self._emit("ok %%d - %s (%.1fs)" % (self._name(test), time.monotonic() - self.t0))

    def addSkip(self, test, reason):
        self._emit("not ok %%d # SKIP %s: %s" % (self._name(test), reason))

    def addFailure(self, test, err):
        self.failed += 1
        self._emit("not ok %%d - %s" % self._name(test),
                   "".join(traceback.format_exception(*err)))

    addError = addFailure

    def addExpectedFailure(self, test, err):
        self._emit("ok %%d - %s (expected failure)" % self._name(test))

    def addUnexpectedSuccess(self, test):
        self.failed += 1
        self._emit("not ok %%d - %s (unexpected success)" % self._name(test))


# The modules make test runs as a script of their own (GM_PY_PART), each under
# tests/run.sh's time limit: test_dataloader is half of all the Python tests' time.
PARTS = {"dataloader": ("test_dataloader",)}


def main(argv):
    names = argv or sorted(f[:-3] for f in os.listdir(HERE)
                           if f.startswith("test_") and f.endswith(".py"))
    part = os.environ.get("GM_PY_PART")
    if not argv and part:  # one part, or (part "rest") the modules of none
        own = PARTS.get(part, ())
        apart = {m for mods in PARTS.values() for m in mods}
        names = [n for n in names if (n in own if part in PARTS else n not in apart)]
    suite = unittest.TestSuite()
    result = TapResult()
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception:
            result.failed += 1
            result._emit("not ok %%d - %s (import)" % name, traceback.format_exc())
            continue
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(mod))
    sanitizer_skip(suite, result, None if argv else set(names))
    only = [g for g in os.environ.get("GM_PYTEST_ONLY", "").split(",") if g]
    if only:
        suite = unittest.TestSuite(t for t in iter_tests(suite)
                                   if any(fnmatch.fnmatch(TapResult._name(t), g) for g in only))
    suite.run(result)
    print("1..%d" % result.n)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
