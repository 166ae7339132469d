"""Third-party warnings that do not apply to most runs, or that only their maintainers can act on, held back in one
place.

TRL reads ``model.is_gradient_checkpointing`` when it unwraps the model to generate, which transformers 5 deprecates
(``FutureWarning``): a note for TRL's maintainers that lands on the progress bar of every run. Recipes already use the
new name, ``trainer.activation_checkpointing``.

bitsandbytes logs, on every import on an AVX512-BF16 CPU, that its optional fast 4-bit CPU kernel could not be
fetched. Only a 4-bit model on a CPU uses that kernel, so the message is kept and shown by the model loader
then (``recipes/model.py``), and dropped otherwise. Importing ``common`` installs the filter, before any entry
point imports peft or TRL (which import bitsandbytes).

transformers warns, on every resume on a new machine, that "the best checkpoint ... recorded in the resumed state does
not exist anymore": that checkpoint is in the store, where the run's ``best`` pointer names it (callbacks/best.py),
and the local pointer says so when it is dropped. Read as a loss, it is dropped.

DeepSpeed, where installed, prints "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable
to detect it." on stdout the first time anything asks it for its accelerator on a machine without a GPU: in every
CPU run, DeepSpeed or not (transformers asks while building the trainer). A run on a CPU says so itself.
"""

from __future__ import annotations

import logging
import warnings


class HeldBack(logging.Filter):
    """Drops records whose message contains ``marker``, keeping the last one in ``self.message``."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker, self.message = marker, None

    def filter(self, record: logging.LogRecord) -> bool:
        if self.marker in record.getMessage():
            self.message = record.getMessage()
            return False
        return True


BNB_CPU_4BIT_KERNEL = HeldBack("gemm_4bit_forward")
logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(BNB_CPU_4BIT_KERNEL)
logging.getLogger("transformers.trainer").addFilter(
    HeldBack("recorded in the resumed state does not exist anymore")
)
# DeepSpeed's logger keeps filters added before its import: it only sets a level and adds a handler.
logging.getLogger("DeepSpeed").addFilter(HeldBack("Setting accelerator to CPU"))

warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
