"""What changes an agent: its lifecycle and the approvals that gate it."""
