"""One Sanitizer with Kafka's rules: the escapes below are what Kafka 3.9's
org.apache.kafka.common.utils.Sanitizer.sanitize returns for each name (run once under the JVM)."""
import pytest

from kafka_compat.sanitizer import desanitize, legacy_sanitize, sanitize

KAFKA = [
    ("alice", "alice"),
    ("a.b-c_d", "a.b-c_d"),
    ("a b", "a%20b"),
    ("a~b", "a%7Eb"),
    ("a*b", "a%2Ab"),
    ("a+b", "a%2Bb"),
    ("%", "%25"),
    ("tab\tx", "tab%09x"),
    ("é", "%C3%A9"),
    ("日本", "%E6%97%A5%E6%9C%AC"),
    ("😀", "%F0%9F%98%80"),
    ("user@example.com", "user%40example.com"),
    ("a/b", "a%2Fb"),
    ("User:CN=Some characters !@#$%&*()_-+=';:,/~",
     "User%3ACN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B%3D%27%3B%3A%2C%2F%7E"),
]


@pytest.mark.parametrize("name, escaped", KAFKA)
def test_sanitize_writes_kafkas_escapes_and_desanitize_reads_them_back(name, escaped):
    assert sanitize(name) == escaped
    assert desanitize(escaped) == name


@pytest.mark.parametrize("written, name", [("a+b", "a b"), ("a%20b", "a b"), ("a~b", "a~b"), ("%2a", "*")])
def test_desanitize_decodes_as_javas_urldecoder(written, name):
    """Kafka's desanitize is URLDecoder: '+' is a space, lower-case escapes are read too."""
    assert desanitize(written) == name


@pytest.mark.parametrize("name", ["a~b", "~", "user with space*", "é~/", "plain"])
def test_names_written_by_the_old_encodings_still_read(name):
    """security/zk_stores once wrote Python's quote (keeping '~'); quotas wrote Kafka's escapes: both
    decode to the name."""
    assert desanitize(legacy_sanitize(name)) == name
    assert desanitize(sanitize(name)) == name
