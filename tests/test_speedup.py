from workflow.stats.speedup import fill_speedups


def case(backend, recipe, ms, workload="w", status="ok"):
    return {"sku": "s", "backend": backend, "workload": workload, "recipe": recipe,
            "status": status, "timing": {"median_ms": ms} if ms else None}


def test_speedups_are_baseline_time_over_case_time():
    cases = [case("torch-eager", "baseline", 4.0), case("torch-eager", "int8wo", 2.0),
             case("torch-inductor", "baseline", 1.0), case("torch-inductor", "int8wo", 0.5),
             case("iree", "baseline", 8.0), case("torch-eager", "int8wo", 1.0, workload="x")]
    fill_speedups(cases)
    eager_q, ind_base, ind_q, iree = cases[1]["speedup"], cases[2]["speedup"], \
        cases[3]["speedup"], cases[4]["speedup"]
    assert eager_q == {"vs_baseline": 2.0, "vs_eager": None}
    assert ind_base == {"vs_baseline": None, "vs_eager": 4.0}
    assert ind_q == {"vs_baseline": 2.0, "vs_eager": 4.0}
    assert iree == {"vs_baseline": None, "vs_eager": 0.5}
    assert cases[5]["speedup"] == {"vs_baseline": None, "vs_eager": None}  # no baseline of x


def test_failed_cases_have_no_speedup_and_give_none():
    cases = [case("torch-eager", "baseline", None, status="failed"),
             case("torch-eager", "int8wo", 2.0)]
    fill_speedups(cases)
    assert cases[1]["speedup"]["vs_baseline"] is None
