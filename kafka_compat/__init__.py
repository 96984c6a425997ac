"""kafka-compat: a Kafka wire-protocol broker in Python."""
import os as _os

# In a checkout (`PYTHONPATH=<checkout>` over an editable install of another one, as each git worktree runs
# its tests), `kafka_compat.storage` and `kafka_compat.codegen` must be this checkout's storage/ and codegen/
# folders, as pyproject's package-dir maps them; the editable install's finder would give the installed
# checkout's instead. Installed from a wheel, the folder above has no pyproject.toml and nothing changes.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_checkout, "pyproject.toml")) and \
        _os.path.isfile(_os.path.join(_checkout, "storage", "unified_log.py")):
    __path__.append(_checkout)
