"""The wire: every connection we open and every statement we send, with their deadlines."""
