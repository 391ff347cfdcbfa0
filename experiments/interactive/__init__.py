"""The interactive fabric (`make cli`): its commands, session, EV commands and Mininet's
own commands on the fabric (cli.py lists the parts), and p4runtime-shell on a switch."""
