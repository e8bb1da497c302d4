"""The Litestar web adapter: HTTP in, use cases, HTTP/SSE out."""
