#include "loom/train/checkpoint_policy.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "loom/core/error.h"

namespace loom {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kPolicyVersion = 1;
}  // namespace

CheckpointPolicy::CheckpointPolicy(CheckpointConfig config) : config_(std::move(config)) {
  LOOM_CHECK(!config_.frequency || config_.frequency->count > 0, ArgumentError,
             "CheckpointConfig: frequency must be positive (leave it unset for one checkpoint at "
             "the end)");
  LOOM_CHECK(enabled() || !numbered(), ArgumentError,
             "CheckpointConfig: preserve_all, max_to_keep and keep_best need a filename");
  LOOM_CHECK(!config_.monitor || ranks_by_value(), ArgumentError,
             "CheckpointConfig: a monitor ranks checkpoints only with keep_best > 0");
}

bool CheckpointPolicy::numbered() const {
  return config_.preserve_all || config_.max_to_keep > 0 || config_.keep_best > 0;
}

std::string CheckpointPolicy::file_name(size_t index) const {
  return numbered() ? config_.filename + std::to_string(index) : config_.filename;
}

Dictionary CheckpointPolicy::encode(const std::vector<Entry>& entries) {
  DictionaryVector list;
  for (const Entry& e : entries) {
    Dictionary d;
    d["index"] = uint64_t{e.index};
    if (e.value) d["value"] = *e.value;
    list.emplace_back(d);
  }
  Dictionary state;
  state["version"] = kPolicyVersion;
  state["retained"] = std::move(list);
  return state;
}

std::vector<CheckpointPolicy::Entry> CheckpointPolicy::decode(const Dictionary& state) {
  LOOM_CHECK(state.get<int64_t>("version") == kPolicyVersion, StateError,
             "checkpoint policy state of version ", state.get<int64_t>("version"),
             "; this build reads version ", kPolicyVersion);
  std::vector<Entry> entries;
  for (const DictionaryValue& v : state.get<DictionaryVector>("retained")) {
    const Dictionary d(v.get<DictionaryMap>());
    Entry e{d.get<uint64_t>("index"), std::nullopt};
    if (d.contains("value")) e.value = d.get<double>("value");
    LOOM_CHECK(entries.empty() || entries.back().index < e.index, StateError,
               "checkpoint policy state: retained indices are not ascending");
    entries.push_back(e);
  }
  return entries;
}

Dictionary CheckpointPolicy::plan_save(size_t index, std::optional<double> value) const {
  if (!numbered()) return encode({});
  // A resumed run may save an index again (after falling back past a damaged newer file).
  std::vector<Entry> all;
  for (const Entry& e : entries_)
    if (e.index < index) all.push_back(e);
  all.push_back({index, value});
  if (config_.preserve_all) return encode(all);

  std::set<size_t> keep;
  if (config_.keep_latest) keep.insert(index);
  for (size_t i = all.size() - std::min(all.size(), config_.max_to_keep); i < all.size(); ++i)
    keep.insert(all[i].index);
  std::vector<Entry> valued;
  for (const Entry& e : all)
    if (e.value) valued.push_back(e);
  // Best first; among equal values the newer one.
  std::sort(valued.begin(), valued.end(), [&](const Entry& a, const Entry& b) {
    if (*a.value != *b.value)
      return config_.mode == MonitorMode::min ? *a.value < *b.value : *a.value > *b.value;
    return a.index > b.index;
  });
  for (size_t i = 0; i < std::min(valued.size(), config_.keep_best); ++i)
    keep.insert(valued[i].index);

  std::vector<Entry> kept;
  for (const Entry& e : all)
    if (keep.count(e.index)) kept.push_back(e);
  return encode(kept);
}

void CheckpointPolicy::commit(size_t index, const Dictionary& planned) {
  std::vector<Entry> next = decode(planned);
  std::set<size_t> kept;
  for (const Entry& e : next) kept.insert(e.index);
  std::set<size_t> dropped;
  for (const Entry& e : entries_) dropped.insert(e.index);
  if (numbered()) dropped.insert(index);  // not best, and the latest is not kept
  for (size_t i : dropped) {
    if (kept.count(i)) continue;
    std::error_code ec;  // a file already gone is what we want
    fs::remove(file_name(i), ec);
  }
  entries_ = std::move(next);
}

void CheckpointPolicy::restore(const Dictionary& state) {
  try {
    entries_ = decode(state);
  } catch (const Error& e) {
    throw StateError("checkpoint '" + config_.filename +
                     "': malformed retention state: " + e.what());
  }
}

Dictionary CheckpointPolicy::state() const {
  return encode(entries_);
}

std::vector<std::string> CheckpointPolicy::retained_files() const {
  std::vector<std::string> files;
  for (const Entry& e : entries_) files.push_back(file_name(e.index));
  return files;
}

std::vector<std::string> CheckpointPolicy::restore_candidates() const {
  std::vector<std::string> candidates;
  if (!enabled()) return candidates;
  const fs::path target(config_.filename);
  std::error_code ec;
  if (fs::is_regular_file(target, ec)) candidates.push_back(config_.filename);

  // filenameN in the same folder, largest N first (CNTK's preserve_all naming).
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string stem = target.filename().string();
  std::vector<std::pair<size_t, std::string>> numbered_files;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0) continue;
    const std::string suffix = name.substr(stem.size());
    if (suffix.size() > 19 ||
        !std::all_of(suffix.begin(), suffix.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (!it->is_regular_file()) continue;
    numbered_files.emplace_back(std::stoull(suffix), config_.filename + suffix);
  }
  std::sort(numbered_files.rbegin(), numbered_files.rend());
  for (auto& [n, file] : numbered_files) candidates.push_back(file);
  return candidates;
}

}  // namespace loom
