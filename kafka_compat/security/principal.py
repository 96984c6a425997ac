"""Who a connection acts as: KafkaPrincipal, the TLS subject name, and Kafka's default principal builder.

PLAINTEXT connections and TLS connections without a client certificate are
User:ANONYMOUS; a TLS client certificate gives User:<subject DN in RFC 2253 form>,
rewritten by `ssl.principal.mapping.rules`; SASL gives User:<authorization id>.

The DN is printed as Java's X500Principal.getName() prints it, because principal
mapping rules and ACLs written for Kafka match against that exact text: RDNs last
to first, joined by ',' without spaces, keywords only for CN C L ST O OU STREET DC
UID (other attributes as dotted OID '=#' DER hex), and each of , = + < > # ; " \\
escaped with a backslash.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping, NamedTuple

USER_TYPE = "User"
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """'Type:name' (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError with Kafka's message otherwise."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    principal_type, _, name = text.partition(":")
    return KafkaPrincipal(principal_type, name)


def sasl_principal(authorization_id: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, authorization_id)


# -- ssl.principal.mapping.rules ---------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules applies to the name."""


def _java_replacement(replacement: str, groups: int, names: Mapping[str, int]) -> Callable[[re.Match], str]:
    """Java's Matcher.replaceAll replacement syntax ($n, ${name}, backslash escapes) as a function.

    As Kafka does, a `$n` naming a group the pattern does not have is shortened to the
    longest existing group number, or kept as the literal text when there is none.
    """
    pieces: list = []
    i = 0
    n = len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            pieces.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.find("}", i)
            group = replacement[i + 2:end]
            if end < 0 or group not in names:
                raise ValueError(f"No group with name {{{group}}} in replacement {replacement}")
            pieces.append(("name", group))
            i = end + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 1
            while j < n and replacement[j].isdigit():
                j += 1
            digits = replacement[i + 1:j]
            number = int(digits[0])
            if number > groups:
                pieces.append("$" + digits)     # Kafka escapes it: a literal
            else:
                k = 1       # Java takes further digits while they still name an existing group
                while k < len(digits) and number * 10 + int(digits[k]) <= groups:
                    number = number * 10 + int(digits[k])
                    k += 1
                pieces.append(("group", number))
                pieces.append(digits[k:])
            i = j
        else:
            pieces.append(c)
            i += 1

    def apply(m: re.Match) -> str:
        out = []
        for p in pieces:
            if isinstance(p, tuple):
                out.append(m.group(p[1]) or "")
            else:
                out.append(p)
        return "".join(out)
    return apply


class _Rule(NamedTuple):
    pattern: re.Pattern | None
    replacement: Callable | None
    to_lower: bool
    to_upper: bool
    text: str = "DEFAULT"

    def __repr__(self) -> str:
        return self.text

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn       # DEFAULT
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: `RULE:pattern/replacement/[LU]` rules and `DEFAULT`, comma separated,
    tried in order; the first rule whose pattern matches the whole DN gives the name."""

    def __init__(self, rules: str | None = "DEFAULT"):
        self.rules = [self._parse(r) for r in self._split("DEFAULT" if rules is None else rules)]
        self.rules = [r for r in self.rules if r is not None]

    @staticmethod
    def _split(rules: str) -> list[str]:
        return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ValueError(f"Invalid rule: {rule}")
        if m.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
        if m.group(1) is not None:
            return _Rule(None, None, False, False)
        if m.group(2) is not None:
            try:    # Java writes named groups (?<name>...), Python (?P<name>...)
                pattern = re.compile(re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", m.group(2)))
            except re.error as e:
                raise ValueError(f"Invalid rule: {rule}: {e}") from None
            case = {"L": "/L", "U": "/U"}.get(m.group(6), "")
            return _Rule(pattern, _java_replacement(m.group(4), pattern.groups, pattern.groupindex), case == "/L",
                         case == "/U",
                         f"RULE:{m.group(2)}/{m.group(4)}{case}")
        return None     # empty rules are ignored

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = {self.rules})"


# -- the subject DN of a DER certificate, as Java prints it ------------------------

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
_STRING_TAGS = {12: "utf-8", 19: "utf-8", 20: "latin-1", 22: "utf-8", 27: "utf-8", 30: "utf-16-be"}
_SPECIAL = set(',=+<>#;"\\')


class CertificateError(ValueError):
    """The certificate's DER encoding could not be read."""


def _tlv(der: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, content start, content end, element end) of the DER element at pos."""
    if pos + 2 > len(der):
        raise CertificateError("truncated DER")
    tag = der[pos]
    if tag & 0x1F == 0x1F:
        raise CertificateError("high tag numbers are not used in certificate names")
    length = der[pos + 1]
    start = pos + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(der):
            raise CertificateError("bad DER length")
        length = int.from_bytes(der[start:start + count], "big")
        start += count
    end = start + length
    if end > len(der):
        raise CertificateError("DER element runs past the end")
    return tag, start, end, end


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    out = []
    pos = start
    while pos < end:
        t = _tlv(der, pos)
        out.append((t[0], t[1], t[2], pos))
        pos = t[3]
    return out


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateError("empty OID")
    first = content[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for b in content[1:]:
        value = value << 7 | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _escape_value(text: str) -> str:
    out = []
    for ch in text:
        if ch in _SPECIAL:
            out.append("\\" + ch)
        elif ch == "\x00":
            out.append("\\00")
        else:
            out.append(ch)
    # leading and trailing spaces (and CRs) are escaped one by one
    lead = 0
    while lead < len(out) and out[lead] in (" ", "\r"):
        lead += 1
    trail = len(out)
    while trail > lead and out[trail - 1] in (" ", "\r"):
        trail -= 1
    return "".join(("\\" + c if i < lead or i >= trail else c) for i, c in enumerate(out))


def rfc2253_name(der: bytes, start: int, end: int) -> str:
    """A DER Name (SEQUENCE OF RDN) between start and end, in Java's RFC 2253 form."""
    rdns = []
    for tag, s, e, _ in _children(der, start, end):
        if tag != 0x31:
            raise CertificateError("an RDN is not a SET")
        avas = []
        for atag, a_s, a_e, _ in _children(der, s, e):
            if atag != 0x30:
                raise CertificateError("an attribute is not a SEQUENCE")
            parts = _children(der, a_s, a_e)
            if len(parts) != 2 or parts[0][0] != 0x06:
                raise CertificateError("bad attribute")
            oid = _oid(der[parts[0][1]:parts[0][2]])
            vtag, v_s, v_e, v_pos = parts[1]
            keyword = _KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(vtag)
            if keyword is None or encoding is None:
                avas.append(f"{keyword or oid}=#{der[v_pos:v_e].hex()}")
            else:
                avas.append(f"{keyword}={_escape_value(der[v_s:v_e].decode(encoding, 'replace'))}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def certificate_subject(cert_der: bytes) -> str:
    """The subject DN of a DER X.509 certificate, as X500Principal.getName() prints it."""
    der = bytes(cert_der)
    tag, s, e, _ = _tlv(der, 0)
    if tag != 0x30:
        raise CertificateError("not a certificate")
    tbs_tag, ts, te, _ = _tlv(der, s)
    if tbs_tag != 0x30:
        raise CertificateError("not a certificate")
    fields = _children(der, ts, te)
    if fields and fields[0][0] == 0xA0:     # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != 0x30:
        raise CertificateError("certificate has no subject")
    return rfc2253_name(der, fields[4][1], fields[4][2])


# -- Kafka's DefaultKafkaPrincipalBuilder ------------------------------------------


class DefaultPrincipalBuilder:
    """Principals as Kafka's default builder makes them (principal.builder.class unset)."""

    def __init__(self, mapping_rules: str | None = "DEFAULT"):
        self.mapper = SslPrincipalMapper(mapping_rules)

    def plaintext(self) -> KafkaPrincipal:
        return ANONYMOUS

    def ssl(self, peer_cert_der: bytes | None) -> KafkaPrincipal:
        """`peer_cert_der` is ssl_object.getpeercert(binary_form=True): None without a client certificate."""
        if not peer_cert_der:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.mapper.name(certificate_subject(peer_cert_der)))

    def sasl(self, authorization_id: str) -> KafkaPrincipal:
        return sasl_principal(authorization_id)
