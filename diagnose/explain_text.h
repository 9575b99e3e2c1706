#pragma once
// The words of a log line as explain reads them (internal to pairperf::diagnose, explain.cpp):
// what an interface name or an address says about who can reach it, and the catalog's templates
// (meanings, causes, checks) filled with a line's fields. Written as the logs print them, so they
// differ from core/interfaces.h's (a log may say "localhost", or "FE80:" in capitals).
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pairperf::log_text {

// Interfaces that only reach this host's containers or VMs: never the peer of another node.
bool is_bridge(const std::string& iface);
// 169.254.0.0/16 and fe80::/10, as text.
bool is_link_local(const std::string& addr);
// 127.0.0.0/8, ::1, its IPv4-mapped form and "localhost", as text.
bool is_loopback(const std::string& addr);

// "[0]eth0:10.0.0.1<0> [1]ib0:fe80::1%ib0<0>" (NCCL's NET/Socket and Bootstrap lists): the
// (interface, address) pairs.
std::vector<std::pair<std::string, std::string>> interface_list(const std::string& text);

// Appends v unless it is empty or already there.
void add_distinct(std::vector<std::string>& values, const std::string& v);

// Fills {field} placeholders; an optional part "[ ... ]" is dropped when a field it names is
// unknown. A required field that is unknown reads as its `fallback` words, else as <field>.
// Returns the text and the required fields it lacks.
std::pair<std::string, std::vector<std::string>> fill(
    const std::string& tmpl, const std::map<std::string, std::string>& values,
    const std::map<std::string, std::string>& fallback = {});

// A meaning or cause reads as a sentence: a field the line does not print is named in words
// (an optional part "[ ... ]" that names it is left out).
std::string fill_text(const std::string& tmpl, const std::map<std::string, std::string>& values);

}  // namespace pairperf::log_text
