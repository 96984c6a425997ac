"""The transaction coordinator: transactional ids, `__transaction_state`, and commit/abort markers."""
from ..sentinels import TRANSACTION_STATE_TOPIC_NAME
from .transaction_coordinator import InitProducerIdResult, TransactionCoordinator
from .transaction_marker_channel_manager import TransactionMarkerChannelManager, TxnMarker
from .transaction_metadata import TransactionMetadata, TransactionState
from .transaction_state_manager import TransactionStateManager

__all__ = ["TransactionCoordinator", "InitProducerIdResult", "TRANSACTION_STATE_TOPIC_NAME",
           "TransactionMarkerChannelManager", "TxnMarker", "TransactionMetadata", "TransactionState",
           "TransactionStateManager"]
