# Install mcpvisor without a package manager:
#   cargo build --release && make install            (to /usr/local)
#   make install PREFIX=/usr DESTDIR=/tmp/stage      (staged, for packagers)
# Debian and Ubuntu: `cargo deb` builds a .deb instead (see README).

PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
DESTDIR ?=
BIN ?= target/release/mcpvisor

BINDIR = $(PREFIX)/bin
MANDIR = $(PREFIX)/share/man
UNITDIR = $(PREFIX)/lib/systemd/system
DOCDIR = $(PREFIX)/share/doc/mcpvisor

.PHONY: all install uninstall

all: $(BIN)

$(BIN):
	cargo build --release

install: $(BIN)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/mcpvisor
	install -D -m 0644 man/mcpvisor.8 $(DESTDIR)$(MANDIR)/man8/mcpvisor.8
	install -D -m 0644 man/mcpvisor.json.5 $(DESTDIR)$(MANDIR)/man5/mcpvisor.json.5
	install -D -m 0644 man/mcpvisor-amqp.7 $(DESTDIR)$(MANDIR)/man7/mcpvisor-amqp.7
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|/usr/bin/mcpvisor|$(BINDIR)/mcpvisor|; s|/etc/mcpvisor/|$(SYSCONFDIR)/mcpvisor/|g' \
		systemd/mcpvisor.service > $(DESTDIR)$(UNITDIR)/mcpvisor.service
	install -m 0644 systemd/mcpvisor.socket $(DESTDIR)$(UNITDIR)/mcpvisor.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/mcpvisor.service
	install -D -m 0644 examples/mcpvisor.json $(DESTDIR)$(DOCDIR)/examples/mcpvisor.json
	# The configuration is the administrator's: never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/mcpvisor/mcpvisor.json || \
		install -D -m 0644 examples/mcpvisor.json $(DESTDIR)$(SYSCONFDIR)/mcpvisor/mcpvisor.json

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/mcpvisor \
		$(DESTDIR)$(MANDIR)/man8/mcpvisor.8 \
		$(DESTDIR)$(MANDIR)/man5/mcpvisor.json.5 \
		$(DESTDIR)$(MANDIR)/man7/mcpvisor-amqp.7 \
		$(DESTDIR)$(UNITDIR)/mcpvisor.service \
		$(DESTDIR)$(UNITDIR)/mcpvisor.socket
	rm -rf $(DESTDIR)$(DOCDIR)
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/mcpvisor/ (the configuration)"
