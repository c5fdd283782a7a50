// Options: a type-erased, deep-copying holder for the config keys a plug-in (a task or a sequence
// encoder) owns. The plug-in defines a plain struct with its keys' defaults and one function that
// binds the struct's members to schema fields; the experiment config holds the struct without
// knowing its type, and the plug-in reads it back with as<T>().
#pragma once

#include <memory>
#include <typeinfo>
#include <vector>

#include "config/schema.h"
#include "core/error.h"

namespace sru::config {

class Options {
 public:
  // Binds a T's members to fields, in sections named like the config's ("data", "model", ...).
  template <typename T>
  using FieldsOf = std::vector<Section> (*)(T&);

  Options() = default;
  template <typename T>
  static Options of(T value, FieldsOf<T> fields) {
    Options o;
    o.holder_ = std::make_unique<Holder<T>>(std::move(value), fields);
    return o;
  }
  Options(const Options& other) : holder_(other.holder_ ? other.holder_->clone() : nullptr) {}
  Options& operator=(const Options& other) {
    if (this != &other) holder_ = other.holder_ ? other.holder_->clone() : nullptr;
    return *this;
  }
  Options(Options&&) noexcept = default;
  Options& operator=(Options&&) noexcept = default;

  bool empty() const { return holder_ == nullptr; }
  // The fields bound to this holder's struct (valid while this Options lives and is not copied over).
  std::vector<Section> sections() { return holder_ ? holder_->sections() : std::vector<Section>{}; }

  template <typename T>
  T& as() {
    SRU_CHECK(holder_ && holder_->type() == typeid(T), "config options accessed as the wrong type");
    return static_cast<Holder<T>*>(holder_.get())->value;
  }
  template <typename T>
  const T& as() const {
    SRU_CHECK(holder_ && holder_->type() == typeid(T), "config options accessed as the wrong type");
    return static_cast<const Holder<T>*>(holder_.get())->value;
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual std::unique_ptr<Base> clone() const = 0;
    virtual std::vector<Section> sections() = 0;
    virtual const std::type_info& type() const = 0;
  };
  template <typename T>
  struct Holder final : Base {
    Holder(T v, FieldsOf<T> f) : value(std::move(v)), fields(f) {}
    std::unique_ptr<Base> clone() const override { return std::make_unique<Holder>(value, fields); }
    std::vector<Section> sections() override { return fields(value); }
    const std::type_info& type() const override { return typeid(T); }
    T value;
    FieldsOf<T> fields;
  };
  std::unique_ptr<Base> holder_;
};

}  // namespace sru::config
