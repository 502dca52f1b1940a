"""Task families declared in YAML: one file describes a whole env, no Python written.

A family file (``envs/families/<name>.yaml``, or any path) declares the tools (description,
JSON-schema args, latency, the fault kinds that apply, a fallback), the world facts that
pre-/post-conditions can read, the task template (a layered DAG of required tool calls, with
alternative ways to make a call and locally attractive traps), the facts the final answer
must contain and the sizes per complexity. :class:`FamilyEnv` turns it into an
:class:`planarena.envs.base.Env`: seeded tasks, a world toolbox, a grader, the fault rules
mapped onto the family's tools, exposure, and :class:`FamilyOracle`, which answers the
simulated LLM's one question (which steps remain, done right) from the declaration alone.

The format is documented with a complete example in ``envs/README.md``. A malformed file fails
when it is loaded (before any episode runs) with :class:`FamilyError`, whose message names the
file, the key and what was expected.

Semantics in one paragraph: a task is a list of *nodes* (one required tool call each) in
layers; a node may be made by any of its *ways* (tool + args, tried in order: a way whose
arguments meet a permanent fault, e.g. ``empty_result``, is replaced by the next), and through
its tool's declared fallback. Args may reference a parent's result (``{ref: parent, path:
[...]}``), which a plan writes as a placeholder. A node may carry one *trap*: a ``dead_end``
(an attractive call whose result shows the path goes nowhere: it costs time, the agent must
go back) or a ``decoy`` (an attractive call whose result looks like the node's but carries
wrong facts; only a careful read or a post-condition tells; a child called on a decoy's
output may reveal it). The last layer's results carry the facts; the answer tool, called with
them, writes the answer the grader reads.

The modules, in the order they build on each other: ``schema`` (the file's format),
``templates`` (its template language), ``tasks`` (seeded tasks), ``validate`` (loading a file,
every problem reported at once), ``world`` (the calls a task knows, the toolbox), ``oracle``
and ``env``.
"""

from planarena.envs.family.env import FAMILIES_DIR, FamilyEnv, family_path
from planarena.envs.family.oracle import FamilyOracle
from planarena.envs.family.schema import FamilyDecl, FamilyError, reference_problems
from planarena.envs.family.tasks import generate
from planarena.envs.family.validate import load_declaration
from planarena.envs.family.world import FamilyIndex, FamilyWorld

__all__ = [
    "FAMILIES_DIR",
    "FamilyDecl",
    "FamilyEnv",
    "FamilyError",
    "FamilyIndex",
    "FamilyOracle",
    "FamilyWorld",
    "family_path",
    "generate",
    "load_declaration",
    "reference_problems",
]
