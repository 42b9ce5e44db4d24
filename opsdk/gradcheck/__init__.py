"""opsdk.gradcheck: every differentiable op's gradient op checked against finite differences,
on cases that hypothesis draws from the op's declaration."""

from .check import Counterexample, DeviceResult, check_device
from .numeric import eval_reference
from .runner import (DEFAULT_SEED, GradCheckReport, OpOutcome, check_op, check_reference, run_gradcheck,
                     select_ops)
from .strategies import Case, OpPlan, case_strategy, plan_op

__all__ = [
    "Case", "Counterexample", "DEFAULT_SEED", "DeviceResult", "GradCheckReport", "OpOutcome",
    "OpPlan", "case_strategy", "check_device", "check_op", "check_reference", "eval_reference", "plan_op",
    "run_gradcheck", "select_ops",
]
