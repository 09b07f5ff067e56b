"""The one exception type the record layer raises for bytes that are not a valid record batch."""


class CorruptRecordError(ValueError):
    """Bytes that are not a valid v2 record batch: bad length, magic, CRC, varint or record.

    The message says what was wrong and where (byte position), so a log line or a client error
    can name the cause. The broker maps it to CORRUPT_MESSAGE; storage recovery truncates at it.
    """
