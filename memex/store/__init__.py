"""Where messages go: the file and S3 object stores, content-addressed attachments, create-only writes."""
