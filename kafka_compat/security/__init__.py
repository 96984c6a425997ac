"""Authentication and authorization: principals, credentials, ACLs, TLS contexts (pure; the network
layer and the handlers wire them in)."""
