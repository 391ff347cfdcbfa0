"""The interactive fabric (`make cli`), its EV commands, and p4runtime-shell on a switch."""
