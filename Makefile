# Install Larder as a systemd service (see docs/running.md, "Install as a service").
#
#   make install                    # build (release) and install under /usr/local and /etc
#   make uninstall
#   make install DESTDIR=/tmp/stage # stage the tree elsewhere (packaging)
#
# BIN=path installs an already built binary instead of building one.
#   make man                        # regenerate docs/man/larder.1 (swift-argument-parser's generate-manual)
#   make deb                        # a Debian package in .build/ (systemd/debian/ holds its metadata)
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR ?= /etc/systemd/system
DESTDIR ?=
BINDIR := $(PREFIX)/bin
DOCDIR := $(PREFIX)/share/doc/larder
MANDIR := $(PREFIX)/share/man/man1
COMPLETIONS := $(PREFIX)/share
UNITS := larder.service larder.socket larder-admin.socket
# The example configuration as installed: its disk tier in the unit's CacheDirectory=.
INSTALLED_CONFIG = sed -e 's|^cache_dir = "none"|cache_dir = "/var/cache/larder"|' config/larder.toml

ifeq ($(origin BIN), undefined)
BIN := .build/release/larder
INSTALL_NEEDS := build
endif

.PHONY: build install uninstall man deb

VERSION := $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/larder/Larder.swift)
ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEBROOT := .build/deb/larder

build:
	swift build -c release --static-swift-stdlib --product larder

# The manual page from the command line's own help (committed: installing
# needs no toolchain for it).
man:
	mkdir -p .build/man
	swift package --allow-writing-to-directory .build/man generate-manual --output-directory .build/man
	cp .build/man/larder.1 docs/man/larder.1

install: $(INSTALL_NEEDS)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/larder
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/larder
	@# An existing configuration is never overwritten. The installed one keeps
	@# its disk tier where the unit's CacheDirectory= is.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml ]; then \
		echo "keeping existing $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml"; \
	else \
		$(INSTALLED_CONFIG) > $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml && chmod 0644 $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml; \
	fi
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	@for unit in $(UNITS); do \
		sed -e 's|/usr/local/bin/larder|$(BINDIR)/larder|g' -e 's|/usr/local/share/doc/larder|$(DOCDIR)|g' \
			-e 's|/etc/larder/|$(SYSCONFDIR)/larder/|g' systemd/$$unit > $(DESTDIR)$(UNITDIR)/$$unit.tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$unit.tmp && mv $(DESTDIR)$(UNITDIR)/$$unit.tmp $(DESTDIR)$(UNITDIR)/$$unit && \
		echo "installed $(DESTDIR)$(UNITDIR)/$$unit"; \
	done
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -D -m 0644 docs/man/larder.1 $(DESTDIR)$(MANDIR)/larder.1
	@# Shell completions, written by the binary being installed.
	install -d -m 0755 $(DESTDIR)$(COMPLETIONS)/bash-completion/completions $(DESTDIR)$(COMPLETIONS)/zsh/site-functions \
		$(DESTDIR)$(COMPLETIONS)/fish/vendor_completions.d
	$(BIN) --generate-completion-script bash > $(DESTDIR)$(COMPLETIONS)/bash-completion/completions/larder
	$(BIN) --generate-completion-script zsh > $(DESTDIR)$(COMPLETIONS)/zsh/site-functions/_larder
	$(BIN) --generate-completion-script fish > $(DESTDIR)$(COMPLETIONS)/fish/vendor_completions.d/larder.fish
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/docs
	install -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 config/grafana-dashboard.json config/prometheus.yml config/prometheus-alerts.yml $(DESTDIR)$(DOCDIR)/examples/
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "next: edit $(SYSCONFDIR)/larder/larder.toml (upstream), then: systemctl enable --now larder"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/larder $(DESTDIR)$(MANDIR)/larder.1 $(DESTDIR)$(COMPLETIONS)/bash-completion/completions/larder \
		$(DESTDIR)$(COMPLETIONS)/zsh/site-functions/_larder $(DESTDIR)$(COMPLETIONS)/fish/vendor_completions.d/larder.fish
	@for unit in $(UNITS); do rm -f $(DESTDIR)$(UNITDIR)/$$unit; done
	rm -rf $(DESTDIR)$(DOCDIR)
	@# The configuration goes only if it is still the installed example.
	@if $(INSTALLED_CONFIG) | cmp -s - $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml; rmdir $(DESTDIR)$(SYSCONFDIR)/larder 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/larder/larder.toml (changed since install; remove it by hand)"; \
	fi
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# A Debian package: the tree `make install` makes under /usr, the binary
# stripped, the manual compressed, with a changelog, the copyright notice
# and maintainer scripts that reload systemd (the service is not started:
# set upstream first). Checked by lintian in the tests.
deb: $(INSTALL_NEEDS)
	rm -rf .build/deb
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(DEBROOT) PREFIX=/usr UNITDIR=/lib/systemd/system BIN=$(BIN)
	strip --strip-unneeded --remove-section=.comment --remove-section=.note $(DEBROOT)/usr/bin/larder
	gzip -9n $(DEBROOT)/usr/share/man/man1/larder.1
	install -m 0644 systemd/debian/copyright $(DEBROOT)/usr/share/doc/larder/copyright
	sed -e 's/@VERSION@/$(VERSION)/' -e "s/@DATE@/$$(date -R)/" systemd/debian/changelog.in | gzip -9n > $(DEBROOT)/usr/share/doc/larder/changelog.gz
	chmod 0644 $(DEBROOT)/usr/share/doc/larder/changelog.gz
	mv $(DEBROOT)/usr/share/zsh/site-functions $(DEBROOT)/usr/share/zsh/vendor-completions
	install -d -m 0755 $(DEBROOT)/DEBIAN
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(ARCH)/' systemd/debian/control.in > $(DEBROOT)/DEBIAN/control
	echo "Installed-Size: $$(du -sk --exclude=DEBIAN $(DEBROOT) | cut -f1)" >> $(DEBROOT)/DEBIAN/control
	install -m 0644 systemd/debian/conffiles $(DEBROOT)/DEBIAN/conffiles
	install -m 0755 systemd/debian/postinst systemd/debian/prerm systemd/debian/postrm $(DEBROOT)/DEBIAN/
	find $(DEBROOT) -type d -exec chmod 0755 {} +
	dpkg-deb --build --root-owner-group $(DEBROOT) .build/larder_$(VERSION)_$(ARCH).deb
