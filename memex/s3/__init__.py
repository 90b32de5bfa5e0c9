"""The S3 transport, below both the object store and the state: one bucket (:mod:`~memex.s3.bucket`), a lean
signed-request client (:mod:`~memex.s3.lean`, signing in :mod:`~memex.s3.sigv4`) on a kept-alive connection (:mod:`~memex.s3.connection`),
compare-and-swap on single objects (:mod:`~memex.s3.cas`) and create-only multipart uploads (:mod:`~memex.s3.multipart`).
Nothing here imports boto3 or opens a socket until the first request.
"""
