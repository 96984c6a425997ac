"""Errors raised by the log engine, each carrying Kafka's numeric error code.

The broker turns ``exc.error_code`` straight into a partition-level error in
its response, so the codes are Kafka's (the generated ErrorCode table).
"""

from kafka_compat.protocol.errors import ErrorCode


class LogError(Exception):
    """Base class: a failure the broker reports to the client as ``error_code``."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", record_errors=()):
        super().__init__(message)
        # (batch_index, message) pairs, as ProduceResponse v8+ RecordErrors wants them.
        self.record_errors = list(record_errors)


class OffsetOutOfRangeError(LogError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptMessageError(LogError):
    error_code = ErrorCode.CORRUPT_MESSAGE


class MessageTooLargeError(LogError):
    """Kafka's RecordTooLargeException: one batch is above max.message.bytes."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(LogError):
    """Kafka's RecordBatchTooLargeException: the append is above segment.bytes."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(LogError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class InvalidRecordError(LogError):
    error_code = ErrorCode.INVALID_RECORD


class UnsupportedForMessageFormatError(LogError):
    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class UnsupportedCompressionTypeError(LogError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class KafkaStorageError(LogError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR
