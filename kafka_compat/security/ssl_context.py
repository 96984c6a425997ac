"""An ssl.SSLContext from Kafka's ssl.* settings (Kafka's DefaultSslEngineFactory), PEM stores only.

Key store: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the private
key and the certificate chain), or inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`;
`ssl.key.password` decrypts an encrypted key. Trust store: `ssl.truststore.type=PEM` with
`ssl.truststore.location` or inline `ssl.truststore.certificates`; without one, the system's CA
certificates are trusted (as Java falls back to its cacerts). JKS and PKCS12 stores are refused
with a ConfigError that says so: convert them to PEM.

`ssl.client.auth` none/requested/required, `ssl.enabled.protocols` (TLSv1.2,TLSv1.3),
`ssl.protocol` and `ssl.cipher.suites` (Java/IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
or OpenSSL names) apply as in Kafka. TLS 1.3 suites cannot be narrowed with Python's ssl module:
naming only TLS 1.3 suites restricts the context to TLS 1.3.
"""
from __future__ import annotations

import os
import re
import ssl
import tempfile
from typing import Any, Mapping

from ..configdef import ConfigError, Password

PEM = "PEM"
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_ORDER = [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_KX_AUTH = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "DHE_DSS": "DHE-DSS-",
            "ECDHE_PSK": "ECDHE-PSK-", "DHE_PSK": "DHE-PSK-", "RSA_PSK": "RSA-PSK-", "PSK": "PSK-", "RSA": ""}
_CIPHER_MAC = {
    "AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305", "AES_128_CBC_SHA256": "AES128-SHA256",
    "AES_256_CBC_SHA256": "AES256-SHA256", "AES_256_CBC_SHA384": "AES256-SHA384", "AES_128_CBC_SHA": "AES128-SHA",
    "AES_256_CBC_SHA": "AES256-SHA", "AES_128_CCM": "AES128-CCM", "AES_256_CCM": "AES256-CCM",
    "AES_128_CCM_8": "AES128-CCM8", "AES_256_CCM_8": "AES256-CCM8", "3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")


def _get(config: Mapping[str, Any], name: str) -> Any:
    value = config.get(name)
    if isinstance(value, Password):
        value = value.value
    if isinstance(value, str) and not value.strip() and name != "ssl.endpoint.identification.algorithm":
        return None
    return value


def _list(config: Mapping[str, Any], name: str, default: list[str]) -> list[str]:
    value = config.get(name)
    if value is None:
        return list(default)
    if isinstance(value, str):
        value = value.split(",")
    return [v.strip() for v in value if v and v.strip()]


def _readable(name: str, path: str) -> str:
    if not os.path.isfile(path):
        raise ConfigError(name, path, "file not found")
    if not os.access(path, os.R_OK):
        raise ConfigError(name, path, "file not readable")
    return path


def _pem_file(store: str, store_type: str, location: str, password: str | None, password_message: str) -> str:
    """What ssl.keystore.location and ssl.truststore.location must both satisfy: a PEM store, no store
    password (PEM has none), a readable file."""
    if store_type != PEM:
        raise ConfigError(f"ssl.{store}.type", store_type, f"only PEM {store[:-5]} stores are supported, not JKS or "
                                                           f"PKCS12: convert the store to PEM and set "
                                                           f"ssl.{store}.type=PEM")
    if password is not None:
        raise ConfigError(f"ssl.{store}.password", message=password_message)
    return _readable(f"ssl.{store}.location", location)


def _pem_blocks(text: str) -> tuple[int, int]:
    """(private keys, certificates) in PEM text."""
    kinds = _PEM_BLOCK.findall(text)
    return sum(1 for k in kinds if k.endswith("PRIVATE KEY")), sum(1 for k in kinds if k == "CERTIFICATE")


def _check_keystore_pem(name: str, text: str) -> None:
    keys, certs = _pem_blocks(text)
    if keys == 0:
        raise ConfigError(name, message=f"{name}: Invalid PEM keystore configs: Private key not provided")
    if keys > 1:
        raise ConfigError(name, message=f"{name}: Invalid PEM keystore configs: Expected one private key, "
                                        f"but found {keys}")
    if certs == 0:
        raise ConfigError(name, message=f"{name}: Invalid PEM keystore configs: At least one certificate "
                                        "expected, but none found")


def _load_chain(ctx: ssl.SSLContext, name: str, path: str, key_password: str | None) -> None:
    # never let OpenSSL prompt on a terminal for an encrypted key's password
    password = key_password if key_password is not None else (lambda: b"")
    try:
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as e:
        hint = "" if key_password is not None else " (an encrypted key needs ssl.key.password)"
        raise ConfigError(name, message=f"{name}: Failed to load PEM SSL keystore: {e.reason or e}{hint}") from None


def _load_keystore(ctx: ssl.SSLContext, config: Mapping[str, Any], required: bool) -> None:
    store_type = (_get(config, "ssl.keystore.type") or "JKS").upper()
    location = _get(config, "ssl.keystore.location")
    key = _get(config, "ssl.keystore.key")
    chain = _get(config, "ssl.keystore.certificate.chain")
    store_password = _get(config, "ssl.keystore.password")
    key_password = _get(config, "ssl.key.password")
    if key is not None or chain is not None:
        if store_type != PEM:
            raise ConfigError("ssl.keystore.type", store_type, "SSL private key can be specified only for PEM, "
                                                               f"but key store type is {store_type}.")
        if chain is None:
            raise ConfigError("ssl.keystore.certificate.chain", message="SSL private key is specified, but "
                                                                        "certificate chain is not specified.")
        if key is None:
            raise ConfigError("ssl.keystore.key", message="SSL certificate chain is specified, but private key is "
                                                          "not specified")
        if location is not None:
            raise ConfigError("ssl.keystore.location", message="Both SSL key store location and separate private "
                                                               "key are specified.")
        if store_password is not None:
            raise ConfigError("ssl.keystore.password", message="SSL key store password cannot be specified with "
                                                               "PEM format, only key password may be specified.")
        _check_keystore_pem("ssl.keystore.key", key + "\n" + chain)
        with tempfile.TemporaryDirectory(prefix="kafka-compat-ssl-") as tmp:
            path = os.path.join(tmp, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(key.strip() + "\n" + chain.strip() + "\n")
            _load_chain(ctx, "ssl.keystore.key", path, key_password)
        return
    if location is not None:
        _pem_file("keystore", store_type, location, store_password, "SSL key store password cannot be specified "
                                                                    "with PEM format, only key password may be "
                                                                    "specified")
        with open(location, encoding="utf-8", errors="replace") as f:
            _check_keystore_pem("ssl.keystore.location", f.read())
        _load_chain(ctx, "ssl.keystore.location", location, key_password)
        return
    if store_password is not None:
        raise ConfigError("ssl.keystore.password", message="SSL key store is not specified, but key store password "
                                                           "is specified.")
    if required:
        raise ConfigError("ssl.keystore.location", message="an SSL listener needs a key store: set "
                                                           "ssl.keystore.type=PEM with ssl.keystore.location, or "
                                                           "ssl.keystore.key and ssl.keystore.certificate.chain")


def _load_truststore(ctx: ssl.SSLContext, config: Mapping[str, Any], purpose: ssl.Purpose) -> None:
    store_type = (_get(config, "ssl.truststore.type") or "JKS").upper()
    location = _get(config, "ssl.truststore.location")
    certs = _get(config, "ssl.truststore.certificates")
    password = _get(config, "ssl.truststore.password")
    if certs is not None:
        if store_type != PEM:
            raise ConfigError("ssl.truststore.type", store_type, "SSL trust store certs can be specified only for "
                                                                 f"PEM, but trust store type is {store_type}.")
        if location is not None:
            raise ConfigError("ssl.truststore.location", message="Both SSL trust store location and separate trust "
                                                                 "certificates are specified.")
        if password is not None:
            raise ConfigError("ssl.truststore.password", message="SSL trust store password cannot be specified for "
                                                                 "PEM format.")
        try:
            ctx.load_verify_locations(cadata=certs)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError("ssl.truststore.certificates", message="ssl.truststore.certificates: Invalid PEM "
                                                                     f"truststore configs: {e}") from None
        return
    if location is not None:
        _pem_file("truststore", store_type, location, password, "SSL trust store password cannot be specified for "
                                                                "PEM format.")
        try:
            ctx.load_verify_locations(cafile=location)
        except ssl.SSLError as e:
            raise ConfigError("ssl.truststore.location", message="ssl.truststore.location: Failed to load PEM SSL "
                                                                 f"truststore {location}: {e.reason or e}") from None
        return
    if password is not None:
        raise ConfigError("ssl.truststore.password", message="SSL trust store is not specified, but trust store "
                                                             "password is specified.")
    ctx.load_default_certs(purpose)


def _protocols(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> bool:
    """Set the version range; True when TLS 1.2 or below may be negotiated."""
    protocol = _get(config, "ssl.protocol") or "TLSv1.3"
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"):
        raise ConfigError("ssl.protocol", protocol, "supported: TLS, TLSv1.2, TLSv1.3")
    enabled = _list(config, "ssl.enabled.protocols", ["TLSv1.2", "TLSv1.3"])
    if not enabled:
        enabled = ["TLSv1.2"] if protocol == "TLSv1.2" else ["TLSv1.2", "TLSv1.3"]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown:
        raise ConfigError("ssl.enabled.protocols", ",".join(enabled), f"unsupported protocol {unknown[0]} "
                                                                      f"(supported: {', '.join(_PROTOCOLS)})")
    positions = sorted({_ORDER.index(_PROTOCOLS[p]) for p in enabled})
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise ConfigError("ssl.enabled.protocols", ",".join(enabled), "the enabled protocols must be a "
                                                                      "contiguous range of TLS versions")
    ctx.minimum_version = _ORDER[positions[0]]
    ctx.maximum_version = _ORDER[positions[-1]]
    return positions[0] < _ORDER.index(ssl.TLSVersion.TLSv1_3)


def openssl_cipher_name(name: str) -> str:
    """A Java/IANA suite name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) as OpenSSL names it
    (ECDHE-RSA-AES128-GCM-SHA256); other names are taken to be OpenSSL's already."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx_auth, _, cipher_mac = name[4:].partition("_WITH_")
    if kx_auth not in _KX_AUTH or cipher_mac not in _CIPHER_MAC:
        raise ValueError(name)
    prefix = _KX_AUTH[kx_auth]
    if cipher_mac == "3DES_EDE_CBC_SHA" and prefix:
        return prefix + "DES-CBC3-SHA"
    return prefix + _CIPHER_MAC[cipher_mac]


def _ciphers(ctx: ssl.SSLContext, config: Mapping[str, Any], tls12_allowed: bool) -> None:
    suites = _list(config, "ssl.cipher.suites", [])
    if not suites:
        return
    tls12 = [s for s in suites if s not in _TLS13_SUITES]
    if not tls12:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    names, bad = [], []
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for suite in tls12:
        try:
            openssl = openssl_cipher_name(suite)
            probe.set_ciphers(openssl)
        except (ValueError, ssl.SSLError):
            bad.append(suite)
            continue
        names.append(openssl)
    if bad:
        raise ConfigError("ssl.cipher.suites", ",".join(suites), f"unknown or unavailable cipher suites: "
                                                                 f"{', '.join(bad)}")
    if tls12_allowed:
        ctx.set_ciphers(":".join(names))


def server_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of an SSL / SASL_SSL listener."""
    client_auth = (_get(config, "ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError("ssl.client.auth", client_auth, "must be one of required, requested, none")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls12 = _protocols(ctx, config)
    _ciphers(ctx, config, tls12)
    _load_keystore(ctx, config, required=True)
    if _CLIENT_AUTH[client_auth] != ssl.CERT_NONE:
        _load_truststore(ctx, config, ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    return ctx


def client_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The context a client of these settings uses (inter-broker connections, tests): the server is
    verified against the trust store, its host name checked unless ssl.endpoint.identification.algorithm
    is empty, and a key store, when given, is offered for mutual TLS."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls12 = _protocols(ctx, config)
    _ciphers(ctx, config, tls12)
    algorithm = config.get("ssl.endpoint.identification.algorithm", "https")
    ctx.check_hostname = bool(algorithm and str(algorithm).lower() == "https")
    _load_truststore(ctx, config, ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, config, required=False)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
